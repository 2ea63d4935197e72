/**
 * Import rules of the three roles and the shared kernel, checked in CI (`npm run lint:imports`).
 *
 *   src/main.ts            the launcher: the only module that imports every role
 *   src/api/               API role (Koa)
 *   workers/               worker role
 *   projections/           projector role
 *   src/* (the rest)       shared kernel: ledger, contracts, models, redis, runtime, db, config, observability
 *
 * Tests (*.test.ts, test/), tools/ and bench/ may import anything; product code imports none of them.
 */
const TESTS = "\\.test\\.ts$";
const KERNEL = "^src/(?!api/|main\\.ts$)";

module.exports = {
  forbidden: [
    { name: "no-circular", severity: "error", comment: "No import circle between modules.", from: {}, to: { circular: true } },
    {
      name: "no-folder-circular",
      severity: "error",
      comment: "No circle between folders (a folder is a unit: if a imports b, b does not import a).",
      scope: "folder",
      from: {},
      to: { circular: true },
    },
    {
      name: "kernel-imports-no-role",
      severity: "error",
      comment: "The shared kernel is used by every role and imports none of them.",
      from: { path: KERNEL, pathNot: TESTS },
      to: { path: "^(src/api/|src/main\\.ts$|workers/|projections/)" },
    },
    {
      name: "inference-parts-import-no-composition",
      severity: "error",
      comment:
        "src/api/inference: the root composes (inferenceServices, inferenceRoutes, endpointFamilies); jobs/, admission/, streaming/ and endpoints/ import none of its modules.",
      from: { path: "^src/api/inference/[^/]+/", pathNot: TESTS },
      to: { path: "^src/api/inference/[^/]+\\.ts$" },
    },
    {
      name: "inference-service-imports-no-endpoint",
      severity: "error",
      comment: "jobs/, admission/ and streaming/ serve every endpoint and know none of them.",
      from: { path: "^src/api/inference/(jobs|admission|streaming)/", pathNot: TESTS },
      to: { path: "^src/api/inference/endpoints/" },
    },
    {
      name: "inference-layers-point-down",
      severity: "error",
      comment: "admission/ is below jobs/, jobs/ below streaming/: admission imports neither, jobs does not import streaming.",
      from: { path: "^src/api/inference/(admission|jobs)/", pathNot: TESTS },
      to: { path: "^src/api/inference/streaming/" },
    },
    {
      name: "admission-imports-no-jobs",
      severity: "error",
      from: { path: "^src/api/inference/admission/", pathNot: TESTS },
      to: { path: "^src/api/inference/jobs/" },
    },
    {
      name: "endpoints-import-no-other-endpoint",
      severity: "error",
      comment:
        "An endpoint family imports only its own folder and endpoints/shared/ (plus jobs/, admission/, streaming/); the Responses API is built on chat requests and may import endpoints/chat/.",
      from: { path: "^src/api/inference/endpoints/([^/]+)/", pathNot: [TESTS, "^src/api/inference/endpoints/responses/"] },
      to: { path: "^src/api/inference/endpoints/([^/]+)/", pathNot: ["^src/api/inference/endpoints/($1|shared)/"] },
    },
    {
      name: "responses-endpoint-imports-only-chat",
      severity: "error",
      from: { path: "^src/api/inference/endpoints/responses/", pathNot: TESTS },
      to: { path: "^src/api/inference/endpoints/(?!responses/|shared/|chat/)" },
    },
    {
      name: "shared-endpoint-helpers-import-no-endpoint",
      severity: "error",
      from: { path: "^src/api/inference/endpoints/shared/", pathNot: TESTS },
      to: { path: "^src/api/inference/endpoints/(?!shared/)" },
    },
    {
      name: "api-imports-no-other-role",
      severity: "error",
      from: { path: "^src/api/", pathNot: TESTS },
      to: { path: "^(workers|projections)/" },
    },
    {
      name: "worker-imports-no-other-role",
      severity: "error",
      from: { path: "^workers/", pathNot: TESTS },
      to: { path: "^(src/api/|src/main\\.ts$|projections/)" },
    },
    {
      name: "projector-imports-no-other-role",
      severity: "error",
      from: { path: "^projections/", pathNot: TESTS },
      to: { path: "^(src/api/|src/main\\.ts$|workers/)" },
    },
    {
      name: "product-imports-no-tests-or-tools",
      severity: "error",
      from: { path: "^(src|workers|projections)/", pathNot: TESTS },
      to: { path: "^(test|tools|bench)/|\\.test\\.ts$" },
    },
    {
      name: "worker-and-projector-load-no-http-framework",
      severity: "error",
      comment: "A worker or projector process loads no Koa: its entry point reaches none of the HTTP framework.",
      from: { path: "^(workers|projections)/main\\.ts$" },
      to: { path: "node_modules/(koa|koa-body|@koa/[^/]+)/", reachable: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"] },
  },
};
