import type { Attributes } from "@opentelemetry/api";
import type { ExportResult } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter, TimedEvent } from "@opentelemetry/sdk-trace";
import { credentialsRedacted } from "./credentialsRedacted.ts";

/**
 * A span exporter that takes credentials out of what spans carry of errors before they leave the process:
 * the exception events instrumentations record (a koa layer records the error a route threw, whose message
 * may quote a key a client put in a path: "No API key with id 'sk-…'"), the status message and string
 * attributes. A span with nothing to take out is exported as it is; one with something is exported
 * through a view of it with those values replaced (the span itself is not changed).
 */
export class CredentialScrubbingSpanExporter implements SpanExporter {
  readonly #inner: SpanExporter;

  constructor(inner: SpanExporter) {
    this.#inner = inner;
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.#inner.export(spans.map(scrubbed), resultCallback);
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}

/** The span, or a view of it whose events, status message and attributes hold no credential. */
export function scrubbed(span: ReadableSpan): ReadableSpan {
  const events = span.events.some((event) => event.attributes && hasCredential(event.attributes)) ? span.events.map(scrubbedEvent) : null;
  const message = span.status.message;
  const status = message !== undefined && credentialsRedacted(message) !== message ? { ...span.status, message: credentialsRedacted(message) } : null;
  const attributes = hasCredential(span.attributes) ? scrubbedAttributes(span.attributes) : null;
  if (events === null && status === null && attributes === null) return span;
  return new Proxy(span, {
    get(target, property, receiver) {
      if (property === "events" && events !== null) return events;
      if (property === "status" && status !== null) return status;
      if (property === "attributes" && attributes !== null) return attributes;
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

function scrubbedEvent(event: TimedEvent): TimedEvent {
  return event.attributes && hasCredential(event.attributes) ? { ...event, attributes: scrubbedAttributes(event.attributes) } : event;
}

function hasCredential(attributes: Attributes): boolean {
  for (const value of Object.values(attributes)) if (typeof value === "string" && credentialsRedacted(value) !== value) return true;
  return false;
}

function scrubbedAttributes(attributes: Attributes): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) out[key] = typeof value === "string" ? credentialsRedacted(value) : value;
  return out;
}
