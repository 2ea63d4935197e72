/**
 * Polls `probe` until it returns a value (not undefined) and returns that value; throws once
 * `timeoutMs` passed. For effects that land after the call that caused them (a job finishing after a
 * disconnect, events becoming readable once older transactions ended).
 */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}
