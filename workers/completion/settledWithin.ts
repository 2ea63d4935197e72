export type Waited<T> = { kind: "resolved"; value: T } | { kind: "rejected"; error: unknown } | { kind: "pending" };

/** How `promise` stands after at most `ms`: settled, or still pending. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<Waited<T>> {
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise<Waited<T>>((resolve) => {
    timer = setTimeout(() => resolve({ kind: "pending" }), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        (value): Waited<T> => ({ kind: "resolved", value }),
        (error: unknown): Waited<T> => ({ kind: "rejected", error }),
      ),
      pending,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
