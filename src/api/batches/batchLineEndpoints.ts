import type { z } from "zod";
import type { Usage } from "../../contracts/deltaMessage.ts";
import type { AppDeps } from "../appDeps.ts";
import { InvalidRequestError } from "../http/errors.ts";
import { invalidRequestFromZod } from "../http/validate.ts";
import { chatResponseShape } from "../inference/endpoints/chat/chatCompletionHandler.ts";
import { type ChatCompletionRequest, ChatCompletionRequestSchema } from "../inference/endpoints/chat/chatCompletionRequestSchema.ts";
import { toEngineChatRequest } from "../inference/endpoints/chat/toEngineChatRequest.ts";
import { completionRequests, textResponseShape } from "../inference/endpoints/completions/completionHandler.ts";
import { type CompletionRequest, CompletionRequestSchema } from "../inference/endpoints/completions/completionRequestSchema.ts";
import { embeddingsBody, embeddingWork } from "../inference/endpoints/embeddings/embeddingHandler.ts";
import { type EmbeddingRequest, EmbeddingRequestSchema } from "../inference/endpoints/embeddings/embeddingRequestSchema.ts";
import type { InferenceServices } from "../inference/inferenceServices.ts";
import { checkRequestSchemas } from "../inference/endpoints/shared/jsonSchemas/checkRequestSchemas.ts";
import type { RunningJob } from "../inference/jobs/runningJob.ts";
import { ResponseEventBuilder } from "../inference/endpoints/responses/responseEventBuilder.ts";
import { toStoredItems } from "../inference/endpoints/responses/responseItems.ts";
import type { ResponseHead } from "../inference/endpoints/responses/responseObject.ts";
import { type ResponseRequest, ResponseRequestSchema } from "../inference/endpoints/responses/responseRequestSchema.ts";
import { responseSettings, toResponseChatRequest } from "../inference/endpoints/responses/toResponseChatRequest.ts";
import { StillQueuedError } from "../inference/jobs/stillQueuedError.ts";
import { jobErrorToApiError } from "../inference/jobs/jobErrorToApiError.ts";
import { resolveModel } from "../inference/endpoints/shared/resolveModel.ts";
import { collectEmbeddings, collectReply } from "../inference/jobs/collectReply.ts";
import type { CompletionHead, ResponseShape } from "../inference/endpoints/shared/serveCompletion.ts";
import type { InferenceJobSpec, JobCaller } from "../inference/jobs/completionJobs.ts";
import type { BatchEndpoint } from "./batchObject.ts";
import { assertPromptFits } from "../inference/admission/promptLengthLimit.ts";

/** What a line's job answered: the endpoint's response body, and what it used. */
export type LineResult = { body: unknown; usage: Usage };

/** How one line runs: its job under a deterministic completion id, or the job already there under that id. */
export type LineRunContext = {
  deps: AppDeps;
  inference: InferenceServices;
  caller: JobCaller;
  completionId: string;
  /** The job of this completion id when one is recorded (a line dispatched again attaches to it), else a new one. */
  start(spec: Omit<InferenceJobSpec, "completionId" | "created" | "stream" | "lane" | "keepQueued">): Promise<{ job: RunningJob; created: number }>;
};

/**
 * A batch line's endpoint: the endpoint's own request schema (checked for every line before anything
 * runs), and the same mapping to a job as its handler, run in the `batch` lane.
 */
export type BatchLineEndpoint = {
  /** The validated body, or the 400 the endpoint would answer (a line of a batch is never streamed). */
  check(body: unknown): { ok: true; model: string } | { ok: false; error: InvalidRequestError };
  run(context: LineRunContext, body: unknown): Promise<LineResult>;
};

function checked<T extends { model: string }>(schema: z.ZodType<T>, extra: (body: T) => InvalidRequestError | null = () => null) {
  return (body: unknown): { ok: true; model: string } | { ok: false; error: InvalidRequestError } => {
    const parsed = schema.safeParse(body);
    if (!parsed.success) return { ok: false, error: invalidRequestFromZod(parsed.error) };
    const refused = extra(parsed.data);
    return refused ? { ok: false, error: refused } : { ok: true, model: parsed.data.model };
  };
}

const notStreamed = (body: { stream?: boolean | null | undefined }) =>
  body.stream === true ? new InvalidRequestError("A batch line is not streamed: remove 'stream'.", { param: "stream", code: "invalid_value" }) : null;

async function collectText(context: LineRunContext, spec: Parameters<LineRunContext["start"]>[0], shape: ResponseShape): Promise<LineResult> {
  const { job, created } = await context.start(spec);
  const collected = await collectReply(job);
  const head: CompletionHead = { id: context.completionId, created, model: spec.model.id, reasoning: spec.model.capabilities.reasoning };
  return { body: shape.body(head, collected), usage: collected.usage };
}

const chat: BatchLineEndpoint = {
  check: checked(ChatCompletionRequestSchema as z.ZodType<ChatCompletionRequest>, notStreamed),
  async run(context, raw) {
    const body = ChatCompletionRequestSchema.parse(raw);
    const model = resolveModel(context.inference.registry, body.model, "chat");
    const work = { kind: "chat" as const, request: toEngineChatRequest(body, model) };
    // The cheap bound before the schemas are compiled (as the chat route).
    assertPromptFits("chat.completions", work, model.context_length);
    checkRequestSchemas(body, context.inference.schemas, model.engine.type === "embedded");
    return collectText(context, { model, endpoint: "chat.completions", work }, chatResponseShape);
  },
};

const completions: BatchLineEndpoint = {
  check: checked(CompletionRequestSchema as z.ZodType<CompletionRequest>, (body) => {
    if (!Array.isArray(body.prompt) || body.prompt.length <= 1) return notStreamed(body);
    return new InvalidRequestError("A batch line of /v1/completions takes one prompt: put each prompt on a line of its own.", {
      param: "prompt",
      code: "invalid_value",
    });
  }),
  async run(context, raw) {
    const body = CompletionRequestSchema.parse(raw);
    const model = resolveModel(context.inference.registry, body.model, "completions");
    const [request] = completionRequests(body, model);
    return collectText(context, { model, endpoint: "completions", work: { kind: "chat", request: request! } }, textResponseShape);
  },
};

const embeddings: BatchLineEndpoint = {
  check: checked(EmbeddingRequestSchema as z.ZodType<EmbeddingRequest>),
  async run(context, raw) {
    const body = EmbeddingRequestSchema.parse(raw);
    const { model, input } = embeddingWork(context.inference, body);
    const { job } = await context.start({ model, endpoint: "embeddings", work: { kind: "embeddings", input } });
    const collected = await collectEmbeddings(job);
    return { body: embeddingsBody(body, model, collected), usage: collected.usage };
  },
};

const RESPONSES_REFUSED = [
  ["stream", "A batch line is not streamed: remove 'stream'."],
  ["background", "A batch line runs in the background already: remove 'background'."],
  ["previous_response_id", "A batch line carries its whole input: 'previous_response_id' is not served in batches."],
] as const;

/**
 * `/v1/responses` lines: the Responses request schema and the same mapping to a chat job as its handler
 * (toResponseChatRequest); the output line's body is the Response object its job's messages build
 * (ResponseEventBuilder). The Response is not stored (`store: false`): the batch's output file holds it.
 */
const responses: BatchLineEndpoint = {
  check: checked(ResponseRequestSchema as z.ZodType<ResponseRequest>, (body) => {
    for (const [param, message] of RESPONSES_REFUSED) {
      if (body[param] !== undefined && body[param] !== null && body[param] !== false) return new InvalidRequestError(message, { param, code: "invalid_value" });
    }
    if (typeof body.input !== "string" && body.input.some((item) => item.type === "item_reference")) {
      return new InvalidRequestError("A batch line carries its whole input: item references are not served in batches.", {
        param: "input",
        code: "invalid_value",
      });
    }
    return null;
  }),
  async run(context, raw) {
    const body = ResponseRequestSchema.parse(raw);
    const model = resolveModel(context.inference.registry, body.model, "chat", "/v1/responses");
    const request = toResponseChatRequest(body, toStoredItems(body.input), model, context.inference.schemas);
    const { job, created } = await context.start({ model, endpoint: "responses", work: { kind: "chat", request } });
    const head: ResponseHead = {
      id: context.completionId,
      created_at: created,
      model: model.id,
      background: false,
      settings: { ...responseSettings(body, request), store: false },
    };
    const now = () => Math.floor(context.deps.clock.now().getTime() / 1000);
    const builder = new ResponseEventBuilder(head, now);
    try {
      for (;;) {
        const message = await job.next();
        if (message.type === "error") throw jobErrorToApiError(message.error, message.usage);
        builder.take(message);
        if (message.type === "usage") return { body: builder.object(), usage: message.usage };
      }
    } finally {
      job.release();
    }
  },
};

/** The endpoints a batch line runs. */
const ENDPOINTS: Record<BatchEndpoint, BatchLineEndpoint> = {
  "/v1/chat/completions": chat,
  "/v1/completions": completions,
  "/v1/embeddings": embeddings,
  "/v1/responses": responses,
};

export function batchLineEndpoint(url: BatchEndpoint): BatchLineEndpoint | null {
  return ENDPOINTS[url] ?? null;
}

/**
 * Runs `spec` as a job of the batch lane for the line's caller (used by LineRunContext.start). The job
 * stays in line however long it waits for a slot (keepQueued): not started within the start timeout, it
 * is followed from its replay stream until it runs and ends, instead of being taken off the queue and
 * dispatched again (which churned).
 */
export async function startBatchJob(
  context: Omit<LineRunContext, "start">,
  spec: Parameters<LineRunContext["start"]>[0],
  created: number,
): Promise<RunningJob> {
  const handle = context.inference.jobs.startFor(context.caller, {
    ...spec,
    completionId: context.completionId,
    created,
    stream: false,
    lane: "batch",
    keepQueued: true,
  });
  try {
    return await handle.started;
  } catch (error) {
    if (error instanceof StillQueuedError) return context.inference.follow(context.completionId, -1, { gapless: true });
    throw error;
  }
}
