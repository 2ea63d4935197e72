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

/**
 * Polls `check` until it returns true and says whether it did before `deadlineMs` passed (it does not
 * throw), for tests that print diagnostics when a condition was never met.
 */
export async function eventuallyTrue(check: () => Promise<boolean>, deadlineMs = 15_000, everyMs = 25): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return check();
}
