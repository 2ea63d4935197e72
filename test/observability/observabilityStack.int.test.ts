import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Ajv } from "ajv";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/observability/metrics.ts";

/**
 * The local observability stack (docker-compose.yml's `observability` profile and deploy/) checked
 * without Docker: the compose file against the Compose Specification's JSON schema (vendored from
 * compose-spec/compose-spec, Apache-2.0: test/support/schemas/compose-spec.json), the files it mounts,
 * Prometheus scraping every role, and every metric name of the Grafana dashboard's PromQL against the
 * platform's registry. .ci/run also runs `docker-compose config -q` when that tool is installed.
 */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const read = (file: string) => readFileSync(ROOT + file, "utf8");
const yamlFile = (file: string) => parse(read(file), { merge: true });

function composeValidator() {
  const { $schema: _draft07, ...schema } = JSON.parse(read("test/support/schemas/compose-spec.json"));
  return new Ajv({ allErrors: true, strict: false }).compile(schema);
}

const compose = yamlFile("docker-compose.yml");
const OBSERVABILITY = ["otel-collector", "jaeger", "prometheus", "grafana"];

describe("docker-compose.yml", () => {
  it("is valid by the Compose Specification schema, which refuses a broken file", () => {
    const validate = composeValidator();
    expect(validate(compose), JSON.stringify(validate.errors)).toBe(true);
    const broken = structuredClone(compose);
    broken.services.prometheus.volume = ["typo"];
    expect(validate(broken)).toBe(false);
    const badProfile = structuredClone(compose);
    badProfile.services.grafana.profiles = "observability";
    expect(validate(badProfile)).toBe(false);
  });

  it("has an observability profile with the collector, Jaeger, Prometheus and Grafana, off by default", () => {
    for (const name of OBSERVABILITY) expect(compose.services[name]?.profiles).toEqual(["observability"]);
    for (const name of ["postgres", "redis", "api", "worker", "projector"]) expect(compose.services[name].profiles).toBeUndefined();
  });

  it("mounts only files committed to the repository", () => {
    const mounts = OBSERVABILITY.flatMap((name) => (compose.services[name].volumes ?? []) as string[]);
    expect(mounts.length).toBeGreaterThanOrEqual(4);
    for (const mount of mounts) {
      const source = mount.split(":")[0]!;
      expect(source.startsWith("./deploy/"), mount).toBe(true);
      expect(existsSync(ROOT + source.slice(2)), mount).toBe(true);
    }
  });

  it("gives every role the metrics port Prometheus scrapes, and keeps /metrics off the API's public port", () => {
    for (const name of ["api", "worker", "projector"]) expect(compose.services[name].environment.METRICS_PORT).toBe("9464");
    expect(compose.services.api.environment.METRICS_ON_API_PORT).toBeUndefined();
    expect(compose.services.api.ports).toEqual(["8080:8080"]);
    expect(compose.services.worker.environment.DATABASE_URL).toBe(compose.services.api.environment.DATABASE_URL);
  });
});

describe("deploy/", () => {
  it("Prometheus scrapes every role at the port it serves /metrics on", () => {
    const prometheus = yamlFile("deploy/prometheus/prometheus.yml");
    const targets = Object.fromEntries(
      (prometheus.scrape_configs as { job_name: string; metrics_path: string; dns_sd_configs: { names: string[]; port: number }[] }[]).map((job) => [
        job.job_name,
        { path: job.metrics_path, names: job.dns_sd_configs[0]!.names, port: job.dns_sd_configs[0]!.port },
      ]),
    );
    expect(targets).toEqual({
      api: { path: "/metrics", names: ["api"], port: 9464 },
      worker: { path: "/metrics", names: ["worker"], port: 9464 },
      projector: { path: "/metrics", names: ["projector"], port: 9464 },
    });
  });

  it("the collector's trace pipeline uses receivers, processors and exporters it defines, and exports to Jaeger", () => {
    const collector = yamlFile("deploy/otel-collector/config.yaml");
    const traces = collector.service.pipelines.traces;
    for (const kind of ["receivers", "processors", "exporters"] as const) {
      for (const name of traces[kind] as string[]) expect(collector[kind][name], `${kind} ${name}`).toBeDefined();
    }
    expect(collector.exporters[traces.exporters[0]].endpoint).toBe("jaeger:4317");
    expect(compose.services.api.environment.OTEL_EXPORTER_OTLP_ENDPOINT).toContain("http://otel-collector:4318");
  });

  it("Grafana's dashboard queries only metrics the platform exports, through the provisioned Prometheus", async () => {
    const datasources = yamlFile("deploy/grafana/provisioning/datasources/datasources.yml").datasources as { uid: string; type: string }[];
    const prometheusUid = datasources.find((d) => d.type === "prometheus")!.uid;
    const dashboard = JSON.parse(read("deploy/grafana/dashboards/inference-platform.json"));
    const panels = (dashboard.panels as { type: string; title: string; datasource?: { uid: string }; targets?: { expr: string }[] }[]).filter(
      (p) => p.type !== "row",
    );
    const titles = panels.map((p) => p.title);
    for (const wanted of [
      "Time to first token",
      "Tokens per second",
      "Queue depth",
      "Queue wait",
      "Error rate",
      "Budget refusals",
      "Projector lag (seconds)",
    ]) {
      expect(titles).toContain(wanted);
    }

    const registry = createMetrics().registry;
    const exported = new Set<string>();
    for (const metric of await registry.getMetricsAsJSON()) {
      exported.add(metric.name);
      if (String(metric.type) === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) exported.add(metric.name + suffix);
    }
    const used = new Set<string>();
    for (const panel of panels) {
      expect(panel.datasource?.uid, panel.title).toBe(prometheusUid);
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const { expr } of panel.targets ?? []) {
        // Without grouping clauses and label matchers, the metric names are the identifiers before a range or a closing parenthesis.
        const bare = expr.replace(/\b(by|without)\s*\([^)]*\)/g, "").replace(/\{[^}]*\}/g, "");
        for (const [, name] of bare.matchAll(/([a-z_][a-z0-9_]*)\s*(?=[[)])/g)) used.add(name!);
      }
    }
    const unknown = [...used].filter((name) => !exported.has(name));
    expect(unknown).toEqual([]);
    for (const name of ["inference_time_to_first_token_seconds_bucket", "inference_queue_jobs", "inference_queue_wait_seconds_bucket"])
      expect(used).toContain(name);
    for (const name of ["budget_holds_refused_total", "projector_lag_seconds", "http_server_requests_total", "inference_output_tokens_total"]) {
      expect(used).toContain(name);
    }
  });
});
