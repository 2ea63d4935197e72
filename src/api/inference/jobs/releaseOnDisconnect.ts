import type { Context } from "koa";
import type { RunningJob } from "./runningJob.ts";

/**
 * A non-streaming request whose client went away stops listening to its jobs (they run on: see
 * AbandonmentWatch). One listener for them all: a multi-prompt completion's 20 prompts added 20, and
 * Node warned of a leak on stderr (MaxListenersExceededWarning, a line outside the JSON log).
 */
export function releaseOnDisconnect(ctx: Context, ...jobs: RunningJob[]): void {
  ctx.res.on("close", () => {
    if (ctx.res.writableFinished) return;
    for (const job of jobs) job.release();
  });
}
