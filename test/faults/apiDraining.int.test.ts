import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/testApp.ts";

/**
 * An API process told to stop drains: /readyz answers 503 `draining` (a load balancer probing a kept-alive
 * connection stopped sending it requests only once the listener closed), and every answer carries
 * `Connection: close`, so that a client whose pooled connection still reaches it opens the next one
 * elsewhere (it was told `server_shutting_down` again on the same connection).
 */
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

/** GET `path` over a connection of its own: status, the Connection header and the body. */
function get(path: string): Promise<{ status: number; connection: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${app.baseUrl}${path}`, { headers: { connection: "keep-alive" } }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
    });
    req.on("error", reject).end();
  });
}

describe("an API process that drains", () => {
  it("answers /readyz 503 draining and closes each connection after its answer", async () => {
    const before = await get("/readyz");
    expect(before.status).toBe(200);
    expect(before.connection).toBe("keep-alive");

    app.deps.shutdown!.begin();
    const ready = await get("/readyz");
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body)).toEqual({ status: "draining" });
    expect(ready.connection).toBe("close");
    const other = await get("/v1/models");
    expect(other.status).toBe(403);
    expect(other.connection).toBe("close");
  });

  it("closes the connection of a request that came before the drain began and is answered after it", async () => {
    const fresh = await startTestApp();
    try {
      const answered = new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
        const req = request(
          `${fresh.baseUrl}/api/v1/accounts/login`,
          { method: "POST", headers: { connection: "keep-alive", "content-type": "application/json", "content-length": "36" } },
          (res) => {
            res.resume();
            res.on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
          },
        );
        req.on("error", reject);
        // Half its body now, the rest once the drain began.
        req.write('{"email":"a@example.com",');
        setTimeout(() => {
          fresh.deps.shutdown!.begin();
          req.end('"p":1}     ');
        }, 200);
      });
      const { status, connection } = await answered;
      expect(status).toBe(400);
      expect(connection).toBe("close");
    } finally {
      await fresh.close();
    }
  });
});
