/**
 * The `--import` module of every entry point (see the npm scripts and the Dockerfile): when tracing is
 * configured (OTEL_EXPORTER_OTLP_ENDPOINT), it installs the ESM loader hook of import-in-the-middle and
 * the library instrumentations (instrumentations.ts) before any application module is loaded, which
 * is what instrumenting ES modules requires. The hook only intercepts the modules an instrumentation
 * asked for (createAddHookMessageChannel). The SDK itself (exporter, propagation, context) is started
 * by runRoles (startTelemetry); the instrumentations' tracers follow it once it is registered.
 *
 * Without tracing configured it loads nothing and installs nothing: tracing then costs nothing.
 * An invalid environment is left to runRoles to report.
 */
import { loadConfig } from "../config/config.ts";

function tracingConfigured(): boolean {
  try {
    return loadConfig(process.env).otlpEndpoint !== undefined;
  } catch {
    return false;
  }
}

if (tracingConfigured()) {
  const { register } = await import("node:module");
  const { createAddHookMessageChannel } = await import("import-in-the-middle");
  const { registerInstrumentations } = await import("@opentelemetry/instrumentation");
  const { platformInstrumentations } = await import("./instrumentations.ts");
  const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
  register("import-in-the-middle/hook.mjs", import.meta.url, registerOptions);
  registerInstrumentations({ instrumentations: platformInstrumentations() });
  await waitForAllMessagesAcknowledged();
}
