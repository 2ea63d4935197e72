import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SERVICE_NODE_FLAGS, SERVICE_PRELOAD } from "./serviceNodeFlags.ts";

describe("the service's V8 flags and preload", () => {
  const flags = [...SERVICE_NODE_FLAGS, ...SERVICE_PRELOAD].join(" ");

  it("are used by npm start and every role script, each exec-ing node (a signal to npm reaches the service, not a shell)", () => {
    const scripts = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts;
    const entryPoints = { start: "src/main.ts", "start:api": "src/api/main.ts", "start:worker": "workers/main.ts", "start:projector": "projections/main.ts" };
    for (const [name, entry] of Object.entries(entryPoints)) expect(scripts[name], name).toBe(`exec node ${flags} ${entry}`);
  });

  it("are used by the container image", () => {
    const cmd = /^CMD (.*)$/m.exec(readFileSync("Dockerfile", "utf8"))?.[1];
    expect(JSON.parse(cmd ?? "null")).toEqual(["node", ...SERVICE_NODE_FLAGS, ...SERVICE_PRELOAD, "src/main.ts"]);
  });

  it("are used by every role of docker-compose.yml (its commands replace the image's CMD)", () => {
    const commands = [...readFileSync("docker-compose.yml", "utf8").matchAll(/^ {4}command: (\["node".*\])$/gm)].map((m) => JSON.parse(m[1]!) as string[]);
    expect(commands).toEqual(
      ["src/api/main.ts", "workers/main.ts", "projections/main.ts"].map((entry) => ["node", ...SERVICE_NODE_FLAGS, ...SERVICE_PRELOAD, entry]),
    );
  });
});
