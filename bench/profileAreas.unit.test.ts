import { describe, expect, it } from "vitest";
import { areaOf, samplesByArea } from "./profileAreas.ts";

describe("areaOf", () => {
  it("names the collector, socket writes, Node's own code and native frames", () => {
    expect(areaOf({ functionName: "(garbage collector)", url: "" })).toBe("garbage collection");
    expect(areaOf({ functionName: "writev", url: "" })).toBe("socket writes");
    expect(areaOf({ functionName: "writeUtf8String", url: "" })).toBe("socket writes");
    expect(areaOf({ functionName: "runMicrotasks", url: "" })).toBe("microtask queue");
    expect(areaOf({ functionName: "socketOnData", url: "node:_http_client" })).toBe("node internals");
  });

  it("groups dependencies by package, scoped ones and koa's family together", () => {
    expect(areaOf({ functionName: "sendCommand", url: "file:///w/node_modules/ioredis/built/Redis.js" })).toBe("dependency: ioredis");
    expect(areaOf({ functionName: "x", url: "file:///w/node_modules/@opentelemetry/sdk-trace-base/build/src/Span.js" })).toBe("dependency: @opentelemetry/*");
    expect(areaOf({ functionName: "x", url: "file:///w/node_modules/@koa/router/lib/router.js" })).toBe("dependency: koa");
    expect(areaOf({ functionName: "x", url: "file:///w/node_modules/koa-compose/index.js" })).toBe("dependency: koa");
    expect(areaOf({ functionName: "x", url: "file:///w/node_modules/bullmq/node_modules/ioredis/built/Command.js" })).toBe("dependency: bullmq");
  });

  it("groups the platform's own code by folder", () => {
    expect(areaOf({ functionName: "relayStream", url: "file:///w/src/api/inference/streaming/relayStream.ts" })).toBe("platform: src/api");
    expect(areaOf({ functionName: "delta", url: "file:///w/workers/completion/deltaPublisher.ts" })).toBe("platform: workers");
    expect(areaOf({ functionName: "recordUsage", url: "file:///w/src/ledger/budget/recordUsage.ts" })).toBe("platform: src/ledger");
  });

  it("sums samples per area, largest first", () => {
    const rows = samplesByArea([
      [{ functionName: "writev", url: "" }, 3],
      [{ functionName: "(garbage collector)", url: "" }, 5],
      [{ functionName: "writeBuffer", url: "" }, 4],
    ]);
    expect(rows).toEqual([
      ["socket writes", 7],
      ["garbage collection", 5],
    ]);
  });
});
