import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "./config.ts";
import { createLogger } from "./observability/logger.ts";
import { startTelemetry } from "./observability/telemetry.ts";
import { DependencyUnavailableError } from "./startup/checkDependencies.ts";
import { ROLE_NAMES, startPlatform, type RoleName } from "./startup/startPlatform.ts";

/**
 * Entry point: `node src/main.ts [--role api|worker|projector]...` (default: every role in this process).
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { role: { type: "string", multiple: true } } });
  const roles = (values.role ?? [...ROLE_NAMES]) as RoleName[];
  for (const role of roles) {
    if (!ROLE_NAMES.includes(role)) throw new ConfigError(`unknown --role "${role}" (expected one of ${ROLE_NAMES.join(", ")})`);
  }
  const config = loadConfig(process.env);
  const logger = createLogger(config.logLevel, { service: "inference-platform" });
  const telemetry = startTelemetry({ otlpEndpoint: config.otlpEndpoint });
  const platform = await startPlatform(config, roles, logger);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info("shutting down", { signal });
    await platform.stop();
    await telemetry.shutdown();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof DependencyUnavailableError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    process.stderr.write(`start-up failed: ${(error as Error).stack ?? String(error)}\n`);
  }
  process.exit(1);
});
