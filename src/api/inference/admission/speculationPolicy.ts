import type { PlaceHoldResult } from "../../../ledger/budget/placeHold.ts";

export type SpeculationPolicyOptions = {
  /** How long what a hold showed of an account's budget is trusted (default 10 s). */
  freshForMs?: number;
  /** Speculate only while the budget left is at least this many times the new hold (default 8). */
  headroomFactor?: number;
  /** Accounts remembered at most (the oldest observation is forgotten first; default 100 000). */
  maxAccounts?: number;
};

/**
 * Decides, per request, whether admission may be speculative: the hold placed in PostgreSQL at the same
 * time as the job is enqueued, instead of before it (saves the hold's round trip on the way to the first
 * token). It may when this process's last hold for the account, at most `freshForMs` ago, left at least
 * `headroomFactor` times the new hold's amount of budget. A refusal, a first request and a nearly spent
 * budget all go the careful way (hold first), so a job that is then refused (cancelled; never charged)
 * is a rare race, and an account over its budget cannot get work run by sending requests.
 * In memory, per API process; nothing here is needed for correctness.
 */
export class SpeculationPolicy {
  readonly #freshForMs: number;
  readonly #headroomFactor: number;
  readonly #maxAccounts: number;
  /** account id -> budget left after its last hold, and when that was seen (insertion order = age). */
  readonly #seen = new Map<string, { remainingMicroChf: number; atMs: number }>();

  constructor(options: SpeculationPolicyOptions = {}) {
    this.#freshForMs = options.freshForMs ?? 10_000;
    this.#headroomFactor = options.headroomFactor ?? 8;
    this.#maxAccounts = options.maxAccounts ?? 100_000;
  }

  maySpeculate(accountId: string, amountMicroChf: number, now: Date): boolean {
    const seen = this.#seen.get(accountId);
    if (!seen || now.getTime() - seen.atMs > this.#freshForMs) return false;
    return seen.remainingMicroChf >= this.#headroomFactor * Math.max(amountMicroChf, 1);
  }

  /** What a hold of the account showed (placed: the budget left; refused: forget, go careful). */
  observe(accountId: string, result: PlaceHoldResult, now: Date): void {
    this.#seen.delete(accountId);
    if (!result.ok) return;
    this.#seen.set(accountId, { remainingMicroChf: result.remainingMicroChf, atMs: now.getTime() });
    if (this.#seen.size > this.#maxAccounts) this.#seen.delete(this.#seen.keys().next().value!);
  }

  /** The hold could not be placed (database error): go careful next time. */
  forget(accountId: string): void {
    this.#seen.delete(accountId);
  }
}
