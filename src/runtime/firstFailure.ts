/** Null once every step succeeded; the first failure as soon as one fails. */
export function firstFailure(steps: readonly Promise<unknown>[]): Promise<{ reason: unknown } | null> {
  return new Promise((resolve) => {
    let left = steps.length;
    if (left === 0) resolve(null);
    for (const step of steps) {
      step.then(
        () => {
          if (--left === 0) resolve(null);
        },
        (reason: unknown) => resolve({ reason }),
      );
    }
  });
}
