import http from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";

/**
 * The closed-loop workload's floor: a bare Node reverse proxy, node:http piping each request to the
 * engine stand-in and its answer back, nothing else (no auth, no queue, no parsing). What one extra
 * HTTP hop in a Node process costs on this machine.
 * `node bench/reverseProxy.ts --target http://127.0.0.1:PORT/v1`; prints {"baseUrl"} once listening.
 */
export async function startReverseProxy(target: string): Promise<{ baseUrl: string; close(): Promise<void> }> {
  const upstream = new URL(target);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const server = http.createServer((req, res) => {
    const forward = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers, agent }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      res.socket?.setNoDelay(true);
      answer.pipe(res);
    });
    forward.setNoDelay(true);
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}${upstream.pathname}`,
    async close() {
      server.closeAllConnections();
      agent.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { target: { type: "string" } } });
  if (values.target === undefined) throw new Error("--target <stand-in base URL> is required");
  const proxy = await startReverseProxy(values.target);
  process.stdout.write(`${JSON.stringify({ baseUrl: proxy.baseUrl })}\n`);
  const stop = () => void proxy.close().then(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  process.on("disconnect", stop);
}

if (import.meta.main) void main();
