import { afterAll, beforeAll } from "vitest";
import { UpstreamEngine } from "../../workers/engines/upstream/upstreamEngine.ts";
import { describeEngineConformance } from "../support/engines/engineConformance.ts";
import { fakeModel } from "./upstreamFakeModel.ts";
import { type FakeUpstream, startFakeUpstream } from "./upstreamFakeServer.ts";

const CONTEXT = 512;
let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
  upstream.handle(fakeModel({ contextLength: CONTEXT }));
});
afterAll(async () => {
  await upstream.close();
});

const all = { chat: true, completions: true, embeddings: true, tools: true, json_schema: true, logprobs: true, reasoning: true };

describeEngineConformance("the upstream engine, every capability declared, continue_final_message", { ...all, continuation: true }, async () => ({
  engine: new UpstreamEngine({ baseUrl: upstream.baseUrl, model: "fake", contextLength: CONTEXT, capabilities: all, continueFinalMessage: true }),
  prompt: "Hello there",
}));

describeEngineConformance(
  "the upstream engine declaring chat and completions only",
  { ...all, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false, continuation: false },
  async () => ({ engine: new UpstreamEngine({ baseUrl: upstream.baseUrl, model: "fake", contextLength: CONTEXT }), prompt: "Hello there" }),
);
