export type StopStep = { name: string; stop: () => Promise<unknown> };

export type StopOutcome = {
  /** Steps still running when the grace period ended, then those never started. */
  cut: string[];
  /** Steps that threw (the next ones still ran). */
  failed: { name: string; error: Error }[];
  elapsedMs: number;
};

/**
 * Runs the steps one after the other (a role's stop drains its in-flight work) until all are done or
 * `graceMs` has passed, whichever comes first. A step still running at the deadline is left behind:
 * the caller exits anyway and reports what was cut.
 */
export async function stopWithin(steps: StopStep[], graceMs: number, now: () => number = () => performance.now()): Promise<StopOutcome> {
  const started = now();
  const failed: StopOutcome["failed"] = [];
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<"deadline">((resolve) => {
    timer = setTimeout(() => resolve("deadline"), graceMs);
  });
  try {
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i]!;
      const done = step.stop().then(
        () => "done" as const,
        (error: unknown) => {
          failed.push({ name: step.name, error: error instanceof Error ? error : new Error(String(error)) });
          return "done" as const;
        },
      );
      if ((await Promise.race([done, deadline])) === "deadline") {
        return { cut: steps.slice(i).map((s) => s.name), failed, elapsedMs: now() - started };
      }
    }
    return { cut: [], failed, elapsedMs: now() - started };
  } finally {
    clearTimeout(timer);
  }
}
