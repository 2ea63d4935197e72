/** Money is integer micro-CHF everywhere inside; CHF decimals only at the HTTP boundary. */
export const MICRO_PER_CHF = 1_000_000;

/** CHF (a JSON number) -> micro-CHF, rounded half-up to the micro-CHF. */
export function chfToMicro(chf: number): number {
  return Math.floor(chf * MICRO_PER_CHF + 0.5);
}

/** micro-CHF -> CHF as a JSON number (exact for up to 6 decimals). */
export function microToChf(micro: number): number {
  return Number((micro / MICRO_PER_CHF).toFixed(6));
}
