/**
 * How an undo is retried: every half second for two minutes (a stall, a restart of Redis).
 * A command that timed out may still run in that time; what undoes it must outlast it.
 */
export const UNDO_RETRY = { forMs: 120_000, intervalMs: 500 } as const;

/**
 * Runs `step` until it succeeds, again every `intervalMs` while it fails, for `forMs` at most; never
 * rejects. For a clean-up that must reach Redis after the request that needed it has already been
 * answered (Redis stalled or away): a command that timed out may still run once Redis answers again, and
 * what undoes it is sent behind it, on the same connection, so Redis runs it after.
 */
export async function retryWhileAway(step: () => Promise<unknown>, options: { forMs: number; intervalMs: number }): Promise<boolean> {
  const giveUpAt = Date.now() + options.forMs;
  for (;;) {
    try {
      await step();
      return true;
    } catch {
      if (Date.now() >= giveUpAt) return false;
      await new Promise((resolve) => setTimeout(resolve, options.intervalMs));
    }
  }
}
