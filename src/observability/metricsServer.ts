import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { PlatformMetrics } from "./metrics.ts";

export type MetricsServer = { port: number; close(): Promise<void> };

/**
 * A listener of its own that answers `GET /metrics` with the process's registry (every role of the
 * process) and 404 to anything else: METRICS_PORT, for workers and projectors (which have no HTTP
 * port) and for an API whose public port should not expose metrics. Port 0 takes a free port (tests).
 */
export async function startMetricsServer(metrics: PlatformMetrics, options: { port: number; host: string }): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("Not found: this listener serves GET /metrics only.\n");
      return;
    }
    metrics.scrape().then(
      ({ contentType, body }) => res.writeHead(200, { "content-type": contentType }).end(req.method === "HEAD" ? undefined : body),
      () => res.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end("The metrics could not be collected.\n"),
    );
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
