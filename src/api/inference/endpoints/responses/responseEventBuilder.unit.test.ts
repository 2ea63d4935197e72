import { describe, expect, it } from "vitest";
import { ResponseEventBuilder } from "./responseEventBuilder.ts";
import type { ResponseSettings } from "./toResponseChatRequest.ts";

const head = { id: "resp_abc", created_at: 1_700_000_000, model: "m", background: false, settings: { logprobs: false } as ResponseSettings };

describe("ResponseEventBuilder", () => {
  it("given a reply whose tokens all read as empty text, when it ends at its cap, then it is one empty message (not a response without output)", () => {
    const builder = new ResponseEventBuilder(head, () => 1_700_000_001);
    const events = [
      ...builder.start(),
      ...builder.take({ seq: 1, type: "finish", finishReason: "length" }),
      ...builder.take({ seq: 2, type: "usage", usage: { promptTokens: 3, completionTokens: 5, reasoningTokens: 0 } }),
    ];
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.incomplete",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const object = builder.object();
    expect(object.status).toBe("incomplete");
    expect(object.output).toEqual([
      {
        id: "msg_abc0",
        type: "message",
        role: "assistant",
        status: "incomplete",
        content: [{ type: "output_text", text: "", annotations: [] }],
      },
    ]);
    expect(object.usage).toMatchObject({ output_tokens: 5 });
  });

  it("given text, then its message is the only output item", () => {
    const builder = new ResponseEventBuilder(head, () => 1_700_000_001);
    builder.start();
    builder.take({ seq: 1, type: "delta", delta: { content: "Hi" } });
    builder.take({ seq: 2, type: "finish", finishReason: "stop" });
    builder.take({ seq: 3, type: "usage", usage: { promptTokens: 3, completionTokens: 1, reasoningTokens: 0 } });
    expect(builder.object().output).toMatchObject([{ type: "message", status: "completed", content: [{ text: "Hi" }] }]);
  });

  it("given text still being generated, then the object as it stands shows it (its item in_progress), while the item's added event showed it empty", () => {
    const builder = new ResponseEventBuilder(head, () => 1_700_000_001);
    builder.start();
    const first = builder.take({ seq: 1, type: "delta", delta: { content: "w0 " } });
    builder.take({ seq: 2, type: "delta", delta: { content: "w1 " } });
    expect(builder.object()).toMatchObject({
      status: "in_progress",
      output: [{ type: "message", status: "in_progress", content: [{ type: "output_text", text: "w0 w1 " }] }],
    });
    expect(first.find((e) => e.type === "response.output_item.added")).toMatchObject({ item: { content: [] } });
    const reasoning = new ResponseEventBuilder(head, () => 1_700_000_001);
    reasoning.start();
    reasoning.take({ seq: 1, type: "delta", delta: { reasoning: "think" } });
    expect(reasoning.object().output).toMatchObject([{ type: "reasoning", content: [{ type: "reasoning_text", text: "think" }] }]);
  });

  it("given a background response cancelled while queued, then its events never say it was in progress", () => {
    const builder = new ResponseEventBuilder({ ...head, background: true }, () => 1_700_000_001);
    const events = [
      ...builder.begin(),
      ...builder.take({ seq: 0, type: "error", error: { kind: "cancelled", message: "cancelled by its owner", param: null } }),
    ];
    expect(events.map((e) => e.type)).toEqual(["response.created", "response.queued", "response.failed"]);
    expect(builder.object()).toMatchObject({ status: "cancelled", output: [] });
  });

  it("given a job the platform stopped (abandoned), then the response failed with an error; given its owner's cancel, then it is cancelled", () => {
    const usage = { promptTokens: 3, completionTokens: 21, reasoningTokens: 0 };
    const stopped = new ResponseEventBuilder(head, () => 1_700_000_001);
    stopped.start();
    stopped.take({ seq: 1, type: "delta", delta: { content: "w0 w1" } });
    const ended = stopped.take({ seq: 2, type: "error", error: { kind: "cancelled", code: "abandoned", message: "stopped", param: null }, usage });
    expect(ended.at(-1)!.type).toBe("response.failed");
    expect(stopped.object()).toMatchObject({ status: "failed", error: { code: "server_error", message: "stopped" }, usage: { output_tokens: 21 } });
    const cancelled = new ResponseEventBuilder(head, () => 1_700_000_001);
    cancelled.start();
    cancelled.take({ seq: 1, type: "error", error: { kind: "cancelled", message: "cancelled by its owner", param: null }, usage });
    expect(cancelled.object()).toMatchObject({ status: "cancelled", error: null });
  });
});
