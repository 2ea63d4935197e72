/** What an error status of the chat API means, in words a console user can act on. */
const STATUS_HINTS = {
  401: "The API key is missing or malformed.",
  402: "Your account has no active subscription, so API calls are refused (402).",
  403: "This API key is invalid or revoked (403).",
};

/** A 429 is the budget (until the next period) or a rate limit (seconds): told apart by the error's code. */
function hintFor(status, error) {
  if (status !== 429) return STATUS_HINTS[status];
  if (error?.code === "monthly_budget_exceeded") return "This period's budget is used up (429); usage resets at the start of the next billing period.";
  return "Too many requests for now (429): wait a moment, then send again.";
}

/**
 * POSTs a streaming request to the API (the same API the SDKs use, with an API key), calling
 * onCompletionId with the x-completion-id header (the completion's or response's id) once the stream
 * opens. Resolves with the response; rejects, in words a console user can act on, when it was refused.
 */
async function openStream(path, body, { apiKey, signal, onCompletionId }) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(body),
    signal,
  }).catch((failure) => {
    // No answer at all: what that means, not the browser's "Failed to fetch" (a Stop's abort stays one).
    if (failure?.name === "AbortError") throw failure;
    throw new Error("The service cannot be reached. Check your connection, then try again in a moment.");
  });
  const completionId = response.headers.get("x-completion-id");
  if (completionId) onCompletionId?.(completionId);
  if (!response.ok) {
    const error = await response.json().catch(() => null);
    const hint = hintFor(response.status, error?.error);
    throw new Error([hint, error?.error?.message].filter(Boolean).join(" ") || `HTTP ${response.status}`);
  }
  return response;
}

/**
 * The server-sent events of a streamed response's body as they arrive: per event that carries data, its
 * `event:` name (null without one) and its `data:` lines joined. Comments (`: queued`) are skipped.
 */
async function* sseEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    const blocks = buffer.split(/\r?\n\r?\n/);
    buffer = blocks.pop();
    for (const block of blocks) {
      let type = null;
      let data = "";
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) yield { type, data };
    }
  }
}

/**
 * Streams a chat completion from /v1/chat/completions, calling onText with the text so far as each piece
 * of content arrives and onCompletionId with the completion's id once the stream opens. Resolves with the
 * full reply.
 */
export async function streamChat({ apiKey, model, messages, signal, onText, onCompletionId }) {
  const response = await openStream("/v1/chat/completions", { model, messages, stream: true, max_tokens: 256 }, { apiKey, signal, onCompletionId });
  let reply = "";
  for await (const { data } of sseEvents(response)) {
    if (data === "[DONE]") return reply;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new Error(chunk.error.message);
    const text = chunk.choices?.[0]?.delta?.content ?? "";
    if (text) {
      reply += text;
      onText(reply);
    }
  }
  return reply;
}

/**
 * Stops a completion's job (POST /v1/chat/completions/{id}/cancel): closing the stream alone would not,
 * a dropped connection is not a cancel. The tokens generated until then are charged.
 */
export async function cancelChat({ apiKey, completionId }) {
  // keepalive: the cancel goes out even when the page is being left.
  const answer = await fetch(`/v1/chat/completions/${encodeURIComponent(completionId)}/cancel`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}` },
    keepalive: true,
  }).catch(() => null);
  const refused = await cancelRefusal(answer);
  if (refused) return { refused };
  // A reply that had ended before the cancel reached it stays whole (and was charged whole).
  const body = answer.ok ? await answer.json().catch(() => null) : null;
  return { alreadyFinished: body?.status === "completed" };
}

/**
 * Why a cancel did not reach the service (no answer: the network; a 429 or 5xx: the service could not
 * take it now), as an Error to show; null when it was answered (stopped, or ended before it, or unknown).
 * The reply then runs on, and is charged, until a cancel gets through.
 */
async function cancelRefusal(answer) {
  if (answer && answer.status !== 429 && answer.status < 500) return null;
  const said = answer
    ? (
        await answer
          .clone()
          .json()
          .catch(() => null)
      )?.error?.message
    : null;
  const why = answer ? `The service could not stop it now (HTTP ${answer.status}${said ? `: ${said}` : ""}).` : "The service could not be reached.";
  return new Error(`${why} The reply goes on and is charged until it is stopped: press Stop again.`);
}

/** The playground's conversation as Responses input items (a message per turn, its text as a string). */
function toInput(messages) {
  return messages.map((m) => ({ type: "message", role: m.role, content: m.content }));
}

/**
 * Streams a response from /v1/responses (OpenAI's Responses API, with an API key): reads its `event:` /
 * `data:` events, calling onText with the text so far at each `response.output_text.delta` and
 * onCompletionId with the response's id (the x-completion-id header) once the stream opens. Resolves
 * with the full reply at `response.completed` / `response.incomplete`; rejects with an AbortError when
 * the response was cancelled (the text so far was given to onText), with its error when it failed.
 */
export async function streamResponse({ apiKey, model, messages, signal, onText, onCompletionId }) {
  const response = await openStream(
    "/v1/responses",
    { model, input: toInput(messages), stream: true, max_output_tokens: 256 },
    { apiKey, signal, onCompletionId },
  );
  let reply = "";
  for await (const { type: name, data } of sseEvents(response)) {
    const event = JSON.parse(data);
    const type = name ?? event.type;
    if (type === "response.output_text.delta") {
      reply += event.delta;
      onText(reply);
    } else if (type === "response.completed" || type === "response.incomplete") {
      return reply;
    } else if (type === "response.failed") {
      // Cancelled (Stop): ended as a stopped stream is, the text so far having reached onText.
      if (event.response?.status === "cancelled") throw new DOMException("The response was cancelled.", "AbortError");
      throw new Error(event.response?.error?.message ?? "The response failed.");
    } else if (type === "error") {
      throw new Error(event.message ?? event.error?.message ?? "The response failed.");
    }
  }
  return reply;
}

/** Stops a response (POST /v1/responses/{id}/cancel): generation and its charge stop; the text so far stays. */
export async function cancelResponse({ apiKey, completionId }) {
  const answer = await fetch(`/v1/responses/${encodeURIComponent(completionId)}/cancel`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}` },
    keepalive: true,
  }).catch(() => null);
  const refused = await cancelRefusal(answer);
  if (refused) return { refused };
  // An ended response cannot be cancelled (400): it stays whole, as it was charged.
  const body = await answer.json().catch(() => null);
  const status = answer?.ok ? body?.status : /status '(\w+)'/.exec(body?.error?.message ?? "")?.[1];
  return { alreadyFinished: status === "completed" || status === "incomplete" };
}
