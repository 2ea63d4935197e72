import { IncomingMessage } from "node:http";
import { context, type Span } from "@opentelemetry/api";
import { getRPCMetadata, RPCType } from "@opentelemetry/core";
import type { Instrumentation } from "@opentelemetry/instrumentation";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import { IORedisInstrumentation } from "@opentelemetry/instrumentation-ioredis";
import { KoaInstrumentation, KoaLayerType } from "@opentelemetry/instrumentation-koa";
import { PgInstrumentation } from "@opentelemetry/instrumentation-pg";
import { redactedPath } from "./redactedPath.ts";

/** Probes and scrapes: no trace for them. */
const PROBES = new Set(["/healthz", "/readyz", "/metrics"]);

/**
 * The library instrumentations of every role: node:http (the API's server spans, the upstream
 * engines' client spans), Koa (a span per matched route), pg and ioredis (a span per query / command).
 *
 * What they record is bounded so that no prompt, completion or secret reaches a span: SQL text only
 * (parameters, which carry event data, are left out: pg's `enhancedDatabaseReporting` stays off);
 * the Redis command name only (a job's data, a delta's text and key hashes travel as arguments); no
 * header is captured; an incoming request's query keeps its parameter names only (a value may be an
 * email, a pagination cursor, or a credential a client put in its URL), and its path no segment that
 * may be a credential (redactedPath). pg and ioredis spans are made only
 * inside a trace, so the projector's polling and the queue's blocking reads do not each start one.
 */
export function platformInstrumentations(): Instrumentation[] {
  return [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (request) => PROBES.has((request.url ?? "").split("?")[0]!),
      requestHook: (span, request) => {
        if (request instanceof IncomingMessage) redactUrl(span, request.url ?? "");
      },
    }),
    new KoaInstrumentation({
      ignoreLayersType: [KoaLayerType.MIDDLEWARE],
      // Each router layer sets the request's route to its own path, a catch-all guard's too
      // (`/v1{/*rest}`): the route the request was matched to (traceRequests' spanRoute) is put back.
      requestHook: (_span, info) => {
        const rpc = getRPCMetadata(context.active());
        const route = (info.context.state as { spanRoute?: unknown } | undefined)?.spanRoute;
        if (rpc?.type === RPCType.HTTP && typeof route === "string") rpc.route = route;
      },
    }),
    new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
    new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
  ];
}

/** Overwrites a server span's `url.path` (redactedPath) and `url.query` (its parameter names, every value `REDACTED`). */
function redactUrl(span: Span, url: string): void {
  const start = url.indexOf("?");
  const path = start < 0 ? url : url.slice(0, start);
  const redacted = redactedPath(path);
  if (redacted !== path) span.setAttribute("url.path", redacted);
  if (start < 0) return;
  const names = [...new URLSearchParams(url.slice(start + 1)).keys()].slice(0, 32);
  span.setAttribute("url.query", names.map((name) => `${encodeURIComponent(name).slice(0, 64)}=REDACTED`).join("&"));
}
