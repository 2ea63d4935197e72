import type { Context } from "koa";
import type { RunningJob } from "./runningJob.ts";

/** A non-streaming request whose client went away stops listening (the job runs on: see AbandonmentWatch). */
export function releaseOnDisconnect(ctx: Context, job: RunningJob): void {
  ctx.res.on("close", () => {
    if (!ctx.res.writableFinished) job.release();
  });
}
