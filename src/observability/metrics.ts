import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { createScrapeSources, type ScrapeSources } from "./scrapeSources.ts";

/** Latency buckets (seconds) for HTTP requests, queue waits and the time to first token. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** Buckets (seconds) between two tokens of one stream. */
const INTER_TOKEN_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5];
/** Buckets of an engine's decode speed (output tokens per second of one generation). */
const TOKENS_PER_SECOND_BUCKETS = [1, 2.5, 5, 10, 20, 35, 50, 75, 100, 150, 250, 500, 1000];

/** Why an inference request's credentials were refused (the label of auth_refusals_total). */
export type AuthRefusalReason = "missing_api_key" | "malformed_api_key" | "unknown_or_revoked_api_key" | "too_many_invalid_api_keys" | "subscription_required";

/**
 * Every Prometheus metric of the platform, in one registry per process (`npm start` runs every role in
 * one process: one registry serves all their metrics). Created by createMetrics and passed to the
 * roles (RoleContext), never imported as a global. Label values are low-cardinality by construction:
 * model ids of the registry, route templates, status codes and fixed reason words; never a key,
 * account or completion id. docs/observability.md lists every metric.
 */
export type PlatformMetrics = {
  registry: Registry;
  /** Scrape-time gauges: pools, Redis connections, queues and projector lag register here while their role runs. */
  sources: ScrapeSources;
  http: {
    requests: Counter<"method" | "route" | "status">;
    duration: Histogram<"method" | "route" | "status">;
    /** Refused before the app saw a request (the HTTP parser, a header timeout, the header limits): no access line. */
    refusals: Counter<"code">;
  };
  inference: {
    timeToFirstToken: Histogram<"model">;
    interTokenLatency: Histogram<"model">;
    inputTokens: Counter<"model">;
    outputTokens: Counter<"model">;
    tokensPerSecond: Histogram<"model">;
    engineErrors: Counter<"model" | "kind">;
  };
  jobs: {
    queueWait: Histogram<"model">;
    /** The same by scheduling lane (interactive, background, batch). */
    queueWaitByLane: Histogram<"model" | "lane">;
    started: Counter<"model" | "mode">;
    completed: Counter<"model">;
    failed: Counter<"model">;
    stalled: Counter<"model">;
    slotsBusy: Gauge<"model">;
    slots: Gauge<"model">;
  };
  budget: {
    holdsPlaced: Counter<"mode">;
    holdsRefused: Counter<"status" | "reason">;
    holdsReleased: Counter<"by">;
    holdsFolded: Counter;
    undeliveredRefunds: Counter;
  };
  auth: { refusals: Counter<"reason"> };
  /** Inference requests refused at admission by a per-tenant limit or a full queue, by reason. */
  admission: { refusals: Counter<"reason"> };
  /** Batch API lines that ended, by model and outcome (done, failed, expired, cancelled); lines waiting and running are read on scrape (sources). */
  batches: { linesEnded: Counter<"model" | "outcome"> };
  /** The text exposition of every metric (for GET /metrics). */
  scrape(): Promise<{ contentType: string; body: string }>;
};

export type CreateMetricsOptions = {
  /** Node's default process metrics (CPU, memory, event loop lag, GC, handles); default true. */
  defaultMetrics?: boolean;
};

export function createMetrics(options: CreateMetricsOptions = {}): PlatformMetrics {
  const registry = new Registry();
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const sources = createScrapeSources(registry);
  const metrics: PlatformMetrics = {
    registry,
    sources,
    http: {
      requests: new Counter({
        name: "http_server_requests_total",
        help: "HTTP requests answered by the API, by method, route template and status",
        labelNames: ["method", "route", "status"],
        registers,
      }),
      duration: new Histogram({
        name: "http_server_request_duration_seconds",
        help: "Time from receiving an HTTP request to the end of its response (a stream: its last byte)",
        labelNames: ["method", "route", "status"],
        buckets: LATENCY_BUCKETS,
        registers,
      }),
      refusals: new Counter({
        name: "http_server_refusals_total",
        help: "Requests refused before the app saw them (not valid HTTP, headers too large or too slow, no Host, an Expect or CONNECT not served), by code",
        labelNames: ["code"],
        registers,
      }),
    },
    inference: {
      timeToFirstToken: new Histogram({
        name: "inference_time_to_first_token_seconds",
        help: "Time from the engine call to its first output token (prefill), by model",
        labelNames: ["model"],
        buckets: LATENCY_BUCKETS,
        registers,
      }),
      interTokenLatency: new Histogram({
        name: "inference_inter_token_latency_seconds",
        help: "Time between two consecutive output deltas of one generation, by model",
        labelNames: ["model"],
        buckets: INTER_TOKEN_BUCKETS,
        registers,
      }),
      inputTokens: new Counter({
        name: "inference_input_tokens_total",
        help: "Prompt tokens processed by the engines, by model",
        labelNames: ["model"],
        registers,
      }),
      outputTokens: new Counter({
        name: "inference_output_tokens_total",
        help: "Tokens generated by the engines (reasoning included), by model",
        labelNames: ["model"],
        registers,
      }),
      tokensPerSecond: new Histogram({
        name: "inference_engine_output_tokens_per_second",
        help: "Decode speed of one generation: output tokens after the first per second after the first token, by model",
        labelNames: ["model"],
        buckets: TOKENS_PER_SECOND_BUCKETS,
        registers,
      }),
      engineErrors: new Counter({
        name: "inference_engine_errors_total",
        help: "Engine calls that failed, by model and kind (invalid_request, unavailable, internal, aborted)",
        labelNames: ["model", "kind"],
        registers,
      }),
    },
    jobs: {
      queueWait: new Histogram({
        name: "inference_queue_wait_seconds",
        help: "Time a completion job waited in its model's queue, from enqueue to a worker taking it",
        labelNames: ["model"],
        buckets: LATENCY_BUCKETS,
        registers,
      }),
      queueWaitByLane: new Histogram({
        name: "inference_queue_wait_lane_seconds",
        help: "Time a completion job waited in its model's queue, by model and scheduling lane (interactive, background, batch)",
        labelNames: ["model", "lane"],
        buckets: LATENCY_BUCKETS,
        registers,
      }),
      started: new Counter({
        name: "inference_jobs_started_total",
        help: "Completion jobs a worker started, by model and mode (new, redelivered after a worker died)",
        labelNames: ["model", "mode"],
        registers,
      }),
      completed: new Counter({
        name: "inference_jobs_completed_total",
        help: "Completion jobs a worker finished running (their stream ended, with a reply or an error message)",
        labelNames: ["model"],
        registers,
      }),
      failed: new Counter({
        name: "inference_jobs_failed_total",
        help: "Completion jobs whose run threw, or that BullMQ failed after their workers died too often",
        labelNames: ["model"],
        registers,
      }),
      stalled: new Counter({
        name: "inference_jobs_stalled_total",
        help: "Running jobs found stalled (their worker stopped renewing the lock) and handed out again",
        labelNames: ["model"],
        registers,
      }),
      slotsBusy: new Gauge({
        name: "inference_worker_slots_busy",
        help: "Jobs this worker process is running now, by model",
        labelNames: ["model"],
        registers,
      }),
      slots: new Gauge({ name: "inference_worker_slots", help: "Jobs this worker process can run at once, by model", labelNames: ["model"], registers }),
    },
    budget: {
      holdsPlaced: new Counter({
        name: "budget_holds_placed_total",
        help: "Budget holds placed at admission, by mode (careful: before the enqueue; speculative: after it)",
        labelNames: ["mode"],
        registers,
      }),
      holdsRefused: new Counter({
        name: "budget_holds_refused_total",
        help: "Admissions refused by the budget, by HTTP status (402, 429) and reason",
        labelNames: ["status", "reason"],
        registers,
      }),
      holdsReleased: new Counter({
        name: "budget_holds_released_total",
        help: "Unsettled budget holds released, by who released them (admission: the job never ran; sweeper: orphaned)",
        labelNames: ["by"],
        registers,
      }),
      holdsFolded: new Counter({
        name: "budget_holds_folded_by_sweeper_total",
        help: "Settled budget holds whose fold was lost and that the sweeper folded",
        registers,
      }),
      undeliveredRefunds: new Counter({
        name: "budget_undelivered_refunds_total",
        help: "Charges refunded (UsageRefunded) because the API gave up on the reply and its client was sent less",
        registers,
      }),
    },
    auth: {
      refusals: new Counter({
        name: "auth_refusals_total",
        help: "Inference requests refused by API-key authentication, by reason",
        labelNames: ["reason"],
        registers,
      }),
    },
    admission: {
      refusals: new Counter({
        name: "inference_admission_refusals_total",
        help: "Inference requests refused before their job was queued or right after, by reason (requests, tokens, concurrency, queue_share, queue_full)",
        labelNames: ["reason"],
        registers,
      }),
    },
    batches: {
      linesEnded: new Counter({
        name: "batch_lines_ended_total",
        help: "Batch API lines that ended, by model and outcome (done: in the output file; failed, expired, cancelled: in the error file)",
        labelNames: ["model", "outcome"],
        registers,
      }),
    },
    async scrape() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
  return metrics;
}
