import { eventually } from "../support/eventually.ts";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatRequest, EngineDelta } from "../../workers/engines/engine.ts";
import { EngineError } from "../../workers/engines/engine.ts";
import { UpstreamEngine } from "../../workers/engines/upstream/upstreamEngine.ts";
import type { UpstreamEngineOptionsInput } from "../../workers/engines/upstream/upstreamEngineOptions.ts";
import { chunk, json, pause, startFakeUpstream, writeSse, type FakeUpstream } from "./upstreamFakeServer.ts";

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
});
afterAll(async () => {
  await upstream.close();
});

const engineFor = (options: Partial<UpstreamEngineOptionsInput> = {}) =>
  new UpstreamEngine({ baseUrl: upstream.baseUrl, model: "up-model", contextLength: 8192, ...options });

const request: ChatRequest = { messages: [{ role: "user", content: "Hi" }], maxTokens: 50, temperature: 1, topP: 1, presencePenalty: 0, frequencyPenalty: 0 };

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

async function chatError(engine: UpstreamEngine, signal = new AbortController().signal) {
  const deltas: EngineDelta[] = [];
  const error = await rejection(engine.chat(request, (delta) => deltas.push(delta), signal));
  return { error, deltas };
}

function expectEngineError(error: unknown, kind: EngineError["kind"], param: string | null = null): EngineError {
  expect(error).toBeInstanceOf(EngineError);
  const engineError = error as EngineError;
  expect(engineError.kind).toBe(kind);
  expect(engineError.param).toBe(param);
  return engineError;
}

describe("UpstreamEngine error mapping", () => {
  it("400 with an OpenAI error body -> invalid_request with the upstream message and param", async () => {
    upstream.handle((_req, res) =>
      json(res, 400, { error: { message: "top_logprobs must be at most 5", type: "invalid_request_error", param: "top_logprobs", code: null } }),
    );
    const { error, deltas } = await chatError(engineFor());
    expect(expectEngineError(error, "invalid_request", "top_logprobs").message).toBe("top_logprobs must be at most 5");
    expect(deltas).toEqual([]);
  });

  it("422 FastAPI validation detail -> invalid_request naming the field", async () => {
    upstream.handle((_req, res) => json(res, 422, { detail: [{ loc: ["body", "response_format", "type"], msg: "Input should be 'json_object'" }] }));
    const { error } = await chatError(engineFor());
    expect(expectEngineError(error, "invalid_request", "response_format.type").message).toBe("Input should be 'json_object'");
  });

  it("503 and 429 -> unavailable; 500 -> internal; 401 and 404 -> unavailable without leaking the key", async () => {
    const cases: Array<[number, EngineError["kind"]]> = [
      [503, "unavailable"],
      [429, "unavailable"],
      [500, "internal"],
      [401, "unavailable"],
      [404, "unavailable"],
    ];
    for (const [status, kind] of cases) {
      upstream.handle((_req, res) => json(res, status, { object: "error", message: `status ${status}`, type: "x", code: status }));
      const { error } = await chatError(engineFor({ apiKey: "sk-never-shown" }));
      const engineError = expectEngineError(error, kind);
      expect(engineError.message).toContain(`status ${status}`);
      expect(engineError.message).not.toContain("sk-never-shown");
    }
  });

  it("a plain-text error body is kept as the message", async () => {
    upstream.handle((_req, res) => {
      res.writeHead(400, { "content-type": "text/plain" }).end("context length exceeded");
    });
    const { error } = await chatError(engineFor());
    expect(expectEngineError(error, "invalid_request").message).toBe("context length exceeded");
  });

  it("connection refused -> unavailable", async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", () => resolve()));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const engine = new UpstreamEngine({ baseUrl: `http://127.0.0.1:${port}/v1`, model: "m", contextLength: 100 });
    const { error } = await chatError(engine);
    expect(expectEngineError(error, "unavailable").message).toContain("ECONNREFUSED");
  });

  it("no response headers within requestTimeoutMs -> unavailable", async () => {
    upstream.handle(() => undefined); // never answers
    const { error } = await chatError(engineFor({ requestTimeoutMs: 200 }));
    expect(expectEngineError(error, "unavailable").message).toContain("did not answer");
  });
});

describe("UpstreamEngine failures mid-stream", () => {
  it("an upstream that drops the connection after some chunks -> internal, after the deltas already delivered", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: "one " } }), chunk({ delta: { content: "two " } }), 'data: {"choices":[{"delta":{"cont']);
      res.socket?.destroy();
    });
    const { error, deltas } = await chatError(engineFor());
    expectEngineError(error, "internal");
    expect(deltas).toEqual([
      { content: "one ", tokens: 1 },
      { content: "two ", tokens: 1 },
    ]);
  });

  it("an error event inside the stream -> internal with the upstream's message", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { content: "partial" } }),
        `data: ${JSON.stringify({ error: { message: "CUDA out of memory", type: "InternalServerError", code: 500 } })}\n\n`,
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const { error, deltas } = await chatError(engineFor());
    expect(expectEngineError(error, "internal").message).toContain("CUDA out of memory");
    expect(deltas).toEqual([{ content: "partial", tokens: 1 }]);
  });

  it("an SSE `event: error` -> internal", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: "a" } }), 'event: error\ndata: {"message":"worker died"}\n\n']);
      res.end();
    });
    const { error } = await chatError(engineFor());
    expect(expectEngineError(error, "internal").message).toContain("worker died");
  });

  it("a stream that ends cleanly but before any finish_reason or [DONE] -> internal", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: "a" } })]);
      res.end();
    });
    const { error, deltas } = await chatError(engineFor());
    expectEngineError(error, "internal");
    expect(deltas).toEqual([{ content: "a", tokens: 1 }]);
  });

  it("one endless line (9 MB without a line end) -> internal, its connection dropped, the memory it took bounded", async () => {
    let closed = false;
    upstream.handle(async (_req, res) => {
      res.on("close", () => {
        closed = true;
      });
      await writeSse(res, [chunk({ delta: { content: "a" } }), "data: "]);
      const block = "y".repeat(64 * 1024);
      for (let i = 0; i < 144 && !res.destroyed; i++) {
        if (!res.write(block)) await new Promise((resolve) => res.once("drain", resolve));
      }
    });
    const { error, deltas } = await chatError(engineFor());
    expect(expectEngineError(error, "internal").message).toContain("longer than");
    expect(deltas).toEqual([{ content: "a", tokens: 1 }]);
    await eventually(async () => (closed ? true : undefined), 5_000);
  });

  it("a stream that goes silent for longer than requestTimeoutMs -> internal", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: "a" } })]);
    });
    const { error } = await chatError(engineFor({ requestTimeoutMs: 200 }));
    expect(expectEngineError(error, "internal").message).toContain("stalled");
  });
});

describe("UpstreamEngine abort and close", () => {
  it("aborting cancels the HTTP request and rejects with an AbortError", async () => {
    let upstreamSawClose: () => void = () => undefined;
    const closed = new Promise<void>((resolve) => (upstreamSawClose = resolve));
    upstream.handle(async (_req, res) => {
      res.on("close", () => upstreamSawClose());
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (let i = 0; i < 1000 && !res.destroyed; i++) {
        res.write(chunk({ delta: { content: `t${i} ` } }));
        await pause(5);
      }
      res.end();
    });
    const controller = new AbortController();
    const deltas: EngineDelta[] = [];
    const error = await rejection(
      engineFor().chat(
        request,
        (delta) => {
          deltas.push(delta);
          if (deltas.length === 3) controller.abort();
        },
        controller.signal,
      ),
    );
    expect((error as Error).name).toBe("AbortError");
    expect(deltas).toHaveLength(3);
    await closed; // the upstream saw its connection go away
  });

  it("an error thrown by the delta sink propagates unchanged and cancels the upstream request", async () => {
    let upstreamSawClose: () => void = () => undefined;
    const closed = new Promise<void>((resolve) => (upstreamSawClose = resolve));
    upstream.handle(async (_req, res) => {
      res.on("close", () => upstreamSawClose());
      await writeSse(res, [chunk({ delta: { content: "a" } }), chunk({ delta: { content: "b" } })], 50);
    });
    const sinkError = new Error("redis is down");
    const error = await rejection(
      engineFor().chat(
        request,
        () => {
          throw sinkError;
        },
        new AbortController().signal,
      ),
    );
    expect(error).toBe(sinkError);
    await closed;
  });

  it("a signal aborted before the call rejects at once without calling the upstream", async () => {
    const before = upstream.received.length;
    const error = await rejection(engineFor().chat(request, () => undefined, AbortSignal.abort()));
    expect((error as Error).name).toBe("AbortError");
    expect(upstream.received.length).toBe(before);
  });

  it("close() ends streams in flight as unavailable and refuses new work", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: "a" } })]);
    });
    const engine = engineFor();
    const running = engine.chat(request, () => void engine.close(), new AbortController().signal);
    expectEngineError(await rejection(running), "unavailable");
    expectEngineError(await rejection(engine.chat(request, () => undefined, new AbortController().signal)), "unavailable");
  });
});

describe("UpstreamEngine.embed", () => {
  it("posts the inputs and returns vectors in input order with the upstream's token count", async () => {
    upstream.handle((_req, res) =>
      json(res, 200, {
        object: "list",
        data: [
          { object: "embedding", index: 1, embedding: [0.5, -1] },
          { object: "embedding", index: 0, embedding: Buffer.from(new Float32Array([0.25, 2]).buffer).toString("base64") },
        ],
        model: "up-embed",
        usage: { prompt_tokens: 7, total_tokens: 7 },
      }),
    );
    const result = await engineFor({ model: "up-embed", capabilities: { embeddings: true } }).embed(["first", "second"], new AbortController().signal);
    expect(result).toEqual({
      embeddings: [
        [0.25, 2],
        [0.5, -1],
      ],
      promptTokens: 7,
    });
    const received = upstream.received.at(-1)!;
    expect(received.path).toBe("/v1/embeddings");
    expect(received.body).toEqual({ model: "up-embed", input: ["first", "second"] });
  });

  it("maps a 400 and rejects a wrong number of vectors", async () => {
    upstream.handle((_req, res) => json(res, 400, { error: { message: "input too long", param: "input" } }));
    expectEngineError(
      await rejection(engineFor({ capabilities: { embeddings: true } }).embed(["x"], new AbortController().signal)),
      "invalid_request",
      "input",
    );
    upstream.handle((_req, res) => json(res, 200, { data: [{ index: 0, embedding: [1] }] }));
    expectEngineError(await rejection(engineFor({ capabilities: { embeddings: true } }).embed(["x", "y"], new AbortController().signal)), "internal");
  });
});

describe("UpstreamEngine token estimates and capabilities", () => {
  it("estimates ceil(UTF-8 bytes / 3) plus chat overheads, and reports the configured capabilities", async () => {
    const engine = engineFor({ contextLength: 4096, capabilities: { tools: true } });
    expect(await engine.countTokens("abcdefg")).toBe(3);
    expect(await engine.countTokens("日本")).toBe(2);
    expect(await engine.countChatTokens([{ role: "user", content: "abc" }])).toBe(3 + 4 + 1);
    expect(engine.capabilities()).toEqual({
      chat: true,
      completions: true,
      embeddings: false,
      tools: true,
      json_schema: false,
      logprobs: false,
      reasoning: false,
      continuation: false,
      contextLength: 4096,
    });
  });

  it("rejects options that are not a usable upstream", () => {
    expect(() => new UpstreamEngine({ baseUrl: "ftp://x", model: "m", contextLength: 1 })).toThrow();
    expect(() => new UpstreamEngine({ baseUrl: "http://x/v1", model: "", contextLength: 1 })).toThrow();
  });
});
