import type { DeltaMessage, EngineDeltaMessage, JobError } from "../../../../contracts/deltaMessage.ts";
import type { FunctionCallItem, MessageItem, OutputText, ReasoningItem, StoredItem } from "./responseItems.ts";
import { type ResponseHead, type ResponseObject, responseObject, type ResponseState, responseUsage } from "./responseObject.ts";

/** One stream event of a response: its `type`, its `sequence_number` (the SSE id) and its payload. */
export type ResponseEvent = { type: string; sequence_number: number } & Record<string, unknown>;

type Open =
  | { kind: "reasoning"; index: number; item: ReasoningItem; part: { type: "reasoning_text"; text: string } }
  | { kind: "message"; index: number; item: MessageItem; part: OutputText }
  | { kind: "call"; index: number; item: FunctionCallItem; toolIndex: number };

/**
 * The Responses stream events of one response, derived only from its head and its job's messages in
 * order: the same messages give the same events with the same sequence numbers, in any API process (a
 * live stream, a replay after `starting_after`, a GET of the object as it stands). Every event carries
 * a `sequence_number` counted from 0:
 *
 * `response.created`, `response.queued` (background responses), `response.in_progress` (the job
 * started); per output item `response.output_item.added`, its content (`response.content_part.added`,
 * `response.output_text.delta`... `.done`, `response.content_part.done`; reasoning as
 * `response.reasoning_text.*`; a function call's `response.function_call_arguments.delta` / `.done`) and
 * `response.output_item.done`; last one of `response.completed`, `response.incomplete` (max output tokens)
 * or `response.failed` (an error, or cancelled: status `cancelled`).
 */
export class ResponseEventBuilder {
  readonly #head: ResponseHead;
  readonly #now: () => number;
  readonly #idSuffix: string;
  #seq = 0;
  #state: ResponseState;
  #open: Open | null = null;
  #finish: "stop" | "length" | "tool_calls" | null = null;
  #begun = false;
  #started = false;
  #refusal: JobError | null = null;

  /** `now`: Unix seconds, the completed_at of a response that ends. */
  constructor(head: ResponseHead, now: () => number) {
    this.#head = head;
    this.#now = now;
    this.#idSuffix = head.id.replace(/^resp_/, "");
    this.#state = { status: head.background ? "queued" : "in_progress", output: [], usage: null, error: null, incomplete_details: null, completed_at: null };
  }

  /**
   * The engine's refusal of the request, or its unavailability, when it ended the response before any
   * output (else null): a response answered whole is then that HTTP error (400, or 503 to retry), not kept.
   */
  get refusal(): JobError | null {
    return this.#refusal;
  }

  get state(): ResponseState {
    return this.#state;
  }

  /** The job started (`response.in_progress` was emitted). */
  get started(): boolean {
    return this.#started;
  }

  get ended(): boolean {
    return this.#state.status !== "queued" && this.#state.status !== "in_progress";
  }

  /** The Response object as it stands. */
  object(): ResponseObject {
    return responseObject(this.#head, this.#state);
  }

  /** The events before the job starts: created (and queued, for a background response). */
  begin(): ResponseEvent[] {
    if (this.#begun) return [];
    this.#begun = true;
    const events = [this.#event("response.created", { response: this.object() })];
    if (this.#head.background) events.push(this.#event("response.queued", { response: this.object() }));
    return events;
  }

  /** The job started: in_progress. */
  start(): ResponseEvent[] {
    const events = this.begin();
    if (this.#started) return events;
    this.#started = true;
    this.#state = { ...this.#state, status: "in_progress" };
    events.push(this.#event("response.in_progress", { response: this.object() }));
    return events;
  }

  /** The events of one message of the job (after `started`). */
  take(message: DeltaMessage): ResponseEvent[] {
    if (this.ended) return [];
    // An error before the job started (cancelled while queued, taken off the queue): it never was in progress.
    const events = message.type === "error" && !this.#started ? this.begin() : this.start();
    switch (message.type) {
      case "delta":
        events.push(...this.#delta(message.delta));
        break;
      case "finish":
        this.#finish = message.finishReason;
        // A reply whose tokens all read as empty text is still a message (as chat answers content ""):
        // not a response that charged output tokens and shows no output.
        if (this.#state.output.length === 0 && this.#open === null) events.push(...this.#openMessage());
        events.push(...this.#close(message.finishReason === "length" ? "incomplete" : "completed"));
        break;
      case "usage": {
        events.push(...this.#close("completed"));
        const incomplete = this.#finish === "length";
        this.#end(incomplete ? "incomplete" : "completed", {
          usage: responseUsage(message.usage),
          incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
        });
        events.push(this.#event(incomplete ? "response.incomplete" : "response.completed", { response: this.object() }));
        break;
      }
      case "error": {
        // Refused (or the model unavailable) before any output: a request answered whole gets the HTTP error.
        const answerable = message.error.kind === "invalid_request" || message.error.kind === "unavailable";
        if (answerable && this.#state.output.length === 0 && this.#open === null) this.#refusal = message.error;
        events.push(...this.#close("incomplete"));
        // Cancelled by its owner; a job the platform stopped (`abandoned`: silent too long; `lost`: its
        // request ended early, by its API process's shutdown or a loss of Redis) failed (a probe read
        // `cancelled` from GET but `response.failed` from the stream, its owner having cancelled nothing).
        const cancelled = message.error.kind === "cancelled" && !message.error.code;
        this.#end(cancelled ? "cancelled" : "failed", {
          usage: message.usage ? responseUsage(message.usage) : null,
          error: cancelled ? null : { code: message.error.kind === "invalid_request" ? "invalid_prompt" : "server_error", message: message.error.message },
        });
        events.push(this.#event("response.failed", { response: this.object() }));
        break;
      }
      default:
        break;
    }
    return events;
  }

  #end(status: ResponseState["status"], fields: Partial<ResponseState>): void {
    this.#state = { ...this.#state, ...fields, status, completed_at: this.#now() };
  }

  #event(type: string, payload: Record<string, unknown>): ResponseEvent {
    return { type, sequence_number: this.#seq++, ...payload };
  }

  #itemId(prefix: string, index: number): string {
    return `${prefix}_${this.#idSuffix}${index}`;
  }

  /** Adds an output item (a copy is in the event: later changes do not show in an event already sent). */
  #add(item: StoredItem): { index: number; event: ResponseEvent } {
    const index = this.#state.output.length;
    this.#state.output.push(item);
    return { index, event: this.#event("response.output_item.added", { output_index: index, item: structuredClone(item) }) };
  }

  #delta(delta: EngineDeltaMessage): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (delta.reasoning) {
      let open = this.#open;
      if (open?.kind !== "reasoning") {
        events.push(...this.#close("completed"));
        const index = this.#state.output.length;
        const item: ReasoningItem = { id: this.#itemId("rs", index), type: "reasoning", summary: [], content: [] };
        const added = this.#add(item);
        events.push(added.event);
        open = { kind: "reasoning", index, item, part: { type: "reasoning_text", text: "" } };
        // The part is in the item from now on (not in the event above): the object as it stands shows the text so far.
        item.content = [open.part];
        this.#open = open;
        events.push(
          this.#event("response.content_part.added", { item_id: item.id, output_index: index, content_index: 0, part: { type: "reasoning_text", text: "" } }),
        );
      }
      open.part.text += delta.reasoning;
      events.push(this.#event("response.reasoning_text.delta", { item_id: open.item.id, output_index: open.index, content_index: 0, delta: delta.reasoning }));
    }
    const logprobs = this.#head.settings.logprobs ? (delta.logprobs ?? []) : [];
    if (delta.content) {
      if (this.#open?.kind !== "message") {
        events.push(...this.#close("completed"));
        events.push(...this.#openMessage());
      }
      const open = this.#open as Extract<Open, { kind: "message" }>;
      open.part.text += delta.content;
      if (open.part.logprobs) open.part.logprobs.push(...logprobs);
      events.push(
        this.#event("response.output_text.delta", { item_id: open.item.id, output_index: open.index, content_index: 0, delta: delta.content, logprobs }),
      );
    }
    for (const piece of delta.toolCalls ?? []) {
      let open = this.#open;
      if (open?.kind !== "call" || open.toolIndex !== piece.index) {
        events.push(...this.#close("completed"));
        const index = this.#state.output.length;
        const item: FunctionCallItem = {
          id: this.#itemId("fc", index),
          type: "function_call",
          status: "in_progress",
          call_id: piece.id ?? `call_${this.#idSuffix}${index}`,
          name: piece.function?.name ?? "",
          arguments: "",
        };
        events.push(this.#add(item).event);
        open = { kind: "call", index, item, toolIndex: piece.index };
        this.#open = open;
      } else if (piece.function?.name) {
        open.item.name += piece.function.name;
      }
      const args = piece.function?.arguments;
      if (args) {
        open.item.arguments += args;
        events.push(this.#event("response.function_call_arguments.delta", { item_id: open.item.id, output_index: open.index, delta: args }));
      }
    }
    return events;
  }

  /** Opens an assistant message item with an empty output_text part (output_item.added, content_part.added). */
  #openMessage(): ResponseEvent[] {
    const index = this.#state.output.length;
    const item: MessageItem = { id: this.#itemId("msg", index), type: "message", role: "assistant", status: "in_progress", content: [] };
    const added = this.#add(item).event;
    const part: OutputText = { type: "output_text", text: "", annotations: [], ...(this.#head.settings.logprobs ? { logprobs: [] } : {}) };
    this.#open = { kind: "message", index, item, part };
    // The part is in the item from now on (the event above has it empty, as added): the object as it
    // stands (a GET while it runs) shows the text so far.
    item.content = [part];
    return [added, this.#event("response.content_part.added", { item_id: item.id, output_index: index, content_index: 0, part: structuredClone(part) })];
  }

  /** Closes the open output item (its content's done events, then output_item.done). */
  #close(status: "completed" | "incomplete"): ResponseEvent[] {
    const open = this.#open;
    if (!open) return [];
    this.#open = null;
    const events: ResponseEvent[] = [];
    const base = { item_id: open.item.id, output_index: open.index };
    if (open.kind === "reasoning") {
      events.push(this.#event("response.reasoning_text.done", { ...base, content_index: 0, text: open.part.text }));
      events.push(this.#event("response.content_part.done", { ...base, content_index: 0, part: structuredClone(open.part) }));
    } else if (open.kind === "message") {
      events.push(this.#event("response.output_text.done", { ...base, content_index: 0, text: open.part.text, logprobs: open.part.logprobs ?? [] }));
      events.push(this.#event("response.content_part.done", { ...base, content_index: 0, part: structuredClone(open.part) }));
    } else {
      events.push(this.#event("response.function_call_arguments.done", { ...base, name: open.item.name, arguments: open.item.arguments }));
    }
    open.item.status = status;
    events.push(this.#event("response.output_item.done", { output_index: open.index, item: structuredClone(open.item) }));
    return events;
  }
}
