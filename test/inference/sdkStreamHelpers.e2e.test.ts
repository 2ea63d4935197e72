import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type OpenAI from "openai";
import { zodFunction, zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * The official SDK's stream helpers accumulate chunks and events into a final object and check them as
 * they go (a tool call's id, type and index; a choice's finish_reason; the Responses events' order and
 * item ids): chat.completions.stream, its auto-parsing formats, runTools, responses.stream and
 * responses.parse, through the real HTTP API, queue and worker on the tiny model.
 */
describe("the openai SDK's stream and parse helpers (tiny model)", () => {
  let platform: TestPlatform;
  let openai: OpenAI;
  beforeAll(async () => {
    platform = await startTestPlatform();
    openai = platform.openai((await platform.createKey()).key);
  });
  afterAll(async () => {
    await platform?.close();
  });

  const Weather = z.object({ city: z.string().max(12), celsius: z.number().int().min(-40).max(50) });

  it("chat.completions.stream with a forced tool call: finalChatCompletion has the call, its arguments parsed", async () => {
    const stream = openai.chat.completions.stream({
      model: TINY_CHAT,
      messages: [{ role: "user", content: "Weather in Bern?" }],
      tools: [zodFunction({ name: "weather", parameters: Weather })],
      tool_choice: "required",
      parallel_tool_calls: false,
      temperature: 0,
      max_tokens: 300,
      stream_options: { include_usage: true },
    });
    const final = await stream.finalChatCompletion();
    const choice = final.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const call = choice.message.tool_calls![0]!;
    expect(call.type).toBe("function");
    expect(call.id.length).toBeGreaterThan(0);
    if (call.type === "function") {
      expect(call.function.name).toBe("weather");
      expect(Weather.parse(call.function.parsed_arguments)).toEqual(JSON.parse(call.function.arguments));
    }
    expect(final.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it("chat.completions.stream with a zod response format: the final message is parsed", async () => {
    const stream = openai.chat.completions.stream({
      model: TINY_CHAT,
      messages: [{ role: "user", content: "Weather in Bern?" }],
      response_format: zodResponseFormat(Weather, "weather"),
      temperature: 0,
      max_tokens: 300,
    });
    let deltas = "";
    stream.on("content.delta", ({ delta }) => {
      deltas += delta;
    });
    const final = await stream.finalChatCompletion();
    const message = final.choices[0]!.message;
    expect(Weather.parse(message.parsed)).toEqual(JSON.parse(message.content!));
    expect(deltas).toBe(message.content);
  });

  it("chat.completions.runTools: the SDK calls the function and sends its result back; the platform answers both rounds", async () => {
    const calls: unknown[] = [];
    const runner = openai.chat.completions.runTools(
      {
        model: TINY_CHAT,
        messages: [{ role: "user", content: "Weather in Bern?" }],
        tools: [
          zodFunction({
            name: "weather",
            parameters: Weather,
            function: (args) => {
              calls.push(args);
              return { forecast: "sunny" };
            },
          }),
        ],
        tool_choice: "required",
        temperature: 0,
        max_tokens: 300,
      },
      { maxChatCompletions: 2 },
    );
    const completions: OpenAI.Chat.ChatCompletion[] = [];
    runner.on("chatCompletion", (completion) => completions.push(completion));
    await runner.done();
    expect(calls.length).toBeGreaterThanOrEqual(1);
    expect(completions.length).toBe(2);
    // The second request carried the tool's result (a tool message answering the first call).
    const toolMessage = runner.messages.find((m) => m.role === "tool");
    expect(toolMessage).toMatchObject({ role: "tool", content: JSON.stringify({ forecast: "sunny" }) });
  });

  it("responses.stream: the accumulated final response equals the stored one, its text equal to the deltas", async () => {
    const stream = openai.responses.stream({ model: TINY_CHAT, input: "Tell me a story", max_output_tokens: 12 });
    let deltas = "";
    stream.on("response.output_text.delta", (event) => {
      deltas += event.delta;
    });
    const final = await stream.finalResponse();
    expect(["completed", "incomplete"]).toContain(final.status);
    expect(final.output_text).toBe(deltas);
    expect((await openai.responses.retrieve(final.id)).output_text).toBe(final.output_text);
  });

  it("responses.parse with zodTextFormat: output_parsed matches the schema", async () => {
    const response = await openai.responses.parse({
      model: TINY_CHAT,
      input: "Weather in Bern?",
      text: { format: zodTextFormat(Weather, "weather") },
      temperature: 0,
      max_output_tokens: 300,
    });
    expect(Weather.parse(response.output_parsed)).toEqual(JSON.parse(response.output_text));
  });
});
