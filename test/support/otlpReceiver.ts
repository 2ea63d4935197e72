import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A span as an OTLP/HTTP JSON export carries it, flattened: ids in hex, attributes as plain values. */
export type ReceivedSpan = {
  service: string;
  scope: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  events: string[];
};

/** `exports`: each export's JSON as it came (events, status messages and all), for checks of what never leaves. */
export type OtlpReceiver = { endpoint: string; spans: ReceivedSpan[]; exports: string[]; close(): Promise<void> };

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: AnyValue[] } };
type KeyValue = { key: string; value: AnyValue };

/**
 * A tiny OTLP/HTTP trace receiver on 127.0.0.1 (JSON encoding, what @opentelemetry/exporter-trace-otlp-http
 * sends): every span exported to `${endpoint}/v1/traces` lands in `spans`. For tests of processes that
 * export their traces (OTEL_EXPORTER_OTLP_ENDPOINT=endpoint).
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const exports: string[] = [];
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (part: Buffer) => parts.push(part));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces" || !String(req.headers["content-type"]).includes("json")) {
        res.writeHead(415).end();
        return;
      }
      const text = Buffer.concat(parts).toString("utf8");
      exports.push(text);
      const body = JSON.parse(text) as {
        resourceSpans?: {
          resource?: { attributes?: KeyValue[] };
          scopeSpans?: {
            scope?: { name?: string };
            spans?: {
              traceId: string;
              spanId: string;
              parentSpanId?: string;
              name: string;
              kind: number;
              startTimeUnixNano: string | number;
              endTimeUnixNano: string | number;
              attributes?: KeyValue[];
              events?: { name: string }[];
            }[];
          }[];
        }[];
      };
      for (const resource of body.resourceSpans ?? []) {
        const service = String(plain(resource.resource?.attributes ?? [])["service.name"] ?? "");
        for (const scope of resource.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              service,
              scope: scope.scope?.name ?? "",
              traceId: hex(span.traceId),
              spanId: hex(span.spanId),
              parentSpanId: span.parentSpanId ? hex(span.parentSpanId) : "",
              name: span.name,
              kind: span.kind,
              startNs: BigInt(span.startTimeUnixNano),
              endNs: BigInt(span.endTimeUnixNano),
              attributes: plain(span.attributes ?? []),
              events: (span.events ?? []).map((e) => e.name),
            });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    exports,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function plain(attributes: KeyValue[]): Record<string, unknown> {
  return Object.fromEntries(attributes.map((a) => [a.key, value(a.value)]));
}

function value(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(value);
  return null;
}

/** Ids arrive hex-encoded (the OTLP JSON rule); base64 (protobuf JSON mapping) is converted. */
function hex(id: string): string {
  return /^[0-9a-f]+$/i.test(id) && (id.length === 32 || id.length === 16) ? id.toLowerCase() : Buffer.from(id, "base64").toString("hex");
}
