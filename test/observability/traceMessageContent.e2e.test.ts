import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTelemetry, type Telemetry } from "../../src/observability/telemetry.ts";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

// An operator's opt-in: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true puts the prompt and the
// reply on the engine span (and nowhere else). Off by default (tracing.e2e.test.ts checks their absence).
const exporter = new InMemorySpanExporter();
let telemetry: Telemetry;
let platform: TestPlatform;
beforeAll(async () => {
  telemetry = startTelemetry({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  platform = await startTestPlatform({ env: { OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: "true" } });
});
afterAll(async () => {
  await platform?.close();
  await telemetry?.shutdown();
});

describe("message content on spans (opt-in)", () => {
  it("records the prompt and the reply on the engine span only", async () => {
    const { key } = await platform.createKey();
    const completion = await platform
      .openai(key)
      .chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "pelican-ochre" }], max_tokens: 4 });
    const engine = await eventually(async () => exporter.getFinishedSpans().find((s) => s.name === `chat ${TINY_CHAT}`));
    expect(JSON.parse(String(engine.attributes["gen_ai.input.messages"]))).toEqual([{ role: "user", content: "pelican-ochre" }]);
    expect(JSON.parse(String(engine.attributes["gen_ai.output.messages"]))).toEqual([{ role: "assistant", content: completion.choices[0]!.message.content }]);
    const others = exporter.getFinishedSpans().filter((s) => s !== engine);
    expect(JSON.stringify(others.map((s) => s.attributes))).not.toContain("pelican-ochre");
  });
});
