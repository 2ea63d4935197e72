import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { type SseItem, SseReader } from "../inference/sseReader.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { type CountingUpstream, countingReply, startCountingUpstream, countingModel } from "./countingUpstream.ts";

/**
 * The reconnect scenario at full length (`npm run chaos`): a client drops a 120-token stream at
 * half-way and comes back with Last-Event-ID after 5 s, or after 30 s (within the default 60 s grace
 * period): every sequence number arrives exactly once, the text is whole, the completion charged once.
 */
const TOKENS = 120;
const DELAY_MS = 150;
const MODEL = "counting-model";

let upstream: CountingUpstream;
let platform: TestPlatform;
let key: string;

beforeAll(async () => {
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: DELAY_MS, promptTokens: 20 });
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 8 });
  platform = await startTestPlatform({ models: () => [model], env: { DELTA_COALESCE_MS: "0" } });
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  await platform?.close();
  await upstream?.close();
});

const textOf = (items: SseItem[]) =>
  items
    .filter((i) => i.data !== undefined && i.data !== "[DONE]")
    .map((i) => (JSON.parse(i.data!) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta?.content ?? "")
    .join("");

describe("a dropped stream resumed with Last-Event-ID", () => {
  for (const awayMs of [5_000, 30_000]) {
    it(`after ${awayMs / 1000} s away: every event once, the whole text, one charge`, async () => {
      const controller = new AbortController();
      const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Count" }], max_tokens: TOKENS + 10, stream: true }),
        signal: controller.signal,
      });
      const completionId = response.headers.get("x-completion-id")!;
      const first = new SseReader(response);
      const seen: SseItem[] = [];
      while (textOf(seen).length < (TOKENS / 2) * 3) {
        const item = await first.next();
        if (!item) throw new Error("the stream ended early");
        seen.push(item);
      }
      controller.abort();
      await first.cancel();
      await new Promise((resolve) => setTimeout(resolve, awayMs));
      const lastId = seen.filter((i) => i.id !== undefined).at(-1)!.id!;
      const rest = await new SseReader(
        await fetch(`${platform.baseUrl}/v1/chat/completions/${completionId}?stream=true`, {
          headers: { authorization: `Bearer ${key}`, "last-event-id": lastId },
        }),
      ).rest();
      expect(rest.at(-1)!.data).toBe("[DONE]");
      const ids = [...seen, ...rest].filter((i) => i.id !== undefined).map((i) => Number(i.id));
      expect(ids).toEqual(ids.map((_, i) => ids[0]! + i));
      expect(textOf([...seen, ...rest])).toBe(countingReply(TOKENS));
      const events = await eventually(async () => {
        const found = await completionEvents(platform.deps.pool, completionId);
        return found.length ? found : undefined;
      });
      expect(events).toHaveLength(1);
      expect(events[0]!.data).toMatchObject({ outcome: "finished", completionTokens: TOKENS });
    }, 120_000);
  }
});
