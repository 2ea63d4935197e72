import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SERVICE_NODE_FLAGS } from "./serviceNodeFlags.ts";

describe("the service's V8 flags", () => {
  const flags = SERVICE_NODE_FLAGS.join(" ");

  it("are used by npm start and every role script", () => {
    const scripts = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts;
    for (const name of ["start", "start:api", "start:worker", "start:projector"]) {
      expect(scripts[name], name).toMatch(new RegExp(`^node ${flags} src/main\\.ts`));
    }
  });

  it("are used by the container image", () => {
    const cmd = /^CMD (.*)$/m.exec(readFileSync("Dockerfile", "utf8"))?.[1];
    expect(JSON.parse(cmd ?? "null")).toEqual(["node", ...SERVICE_NODE_FLAGS, "src/main.ts"]);
  });

  it("are used by every role of docker-compose.yml (its commands replace the image's CMD)", () => {
    const commands = [...readFileSync("docker-compose.yml", "utf8").matchAll(/^ {4}command: (\[.*"src\/main\.ts".*\])$/gm)].map((m) => JSON.parse(m[1]!) as string[]);
    expect(commands.map((command) => command.at(-1))).toEqual(["api", "worker", "projector"]);
    for (const command of commands) expect(command.slice(0, -2)).toEqual(["node", ...SERVICE_NODE_FLAGS, "src/main.ts"]);
  });
});
