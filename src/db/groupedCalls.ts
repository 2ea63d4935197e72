export type GroupedCallsOptions = {
  /** Most calls in one group. */
  maxBatch?: number;
  /** Groups running at once. */
  maxInFlight?: number;
};

/** How the calls are run: a group of two or more at once, or one alone. */
export type GroupRunner<Item, Result> = {
  /** Runs every item of `items` at once; the results in the order of `items`. All or nothing: on an error none counts. */
  group(items: Item[]): Promise<Result[]>;
  /** Runs one item alone. */
  one(item: Item): Promise<Result>;
};

type Pending<Item, Result> = { item: Item; resolve: (result: Result) => void; reject: (error: unknown) => void };

/**
 * Group commit of calls: the calls made while earlier groups are running are run together, as one group
 * (one transaction, one statement), instead of one each. Nothing waits for a timer: a call with no group
 * running ahead of it runs at the end of the current event-loop turn (alone at low load, with whatever
 * else the turn called); groups form only while `maxInFlight` groups are already running.
 *
 * A call's promise settles only once its group has: with the group's result for it, or, when the group
 * failed (any error, a lost connection, even at COMMIT), with the result or error of the call run again
 * alone, each call on its own, so one bad item fails only its own caller. `group` must therefore leave
 * nothing behind when it fails, and `one` must be safe after a group that did commit unseen.
 */
export class GroupedCalls<Item, Result> {
  readonly #runner: GroupRunner<Item, Result>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #queue: Pending<Item, Result>[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(runner: GroupRunner<Item, Result>, options: GroupedCallsOptions = {}) {
    this.#runner = runner;
    this.#maxBatch = options.maxBatch ?? 64;
    this.#maxInFlight = options.maxInFlight ?? 2;
  }

  call(item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight || this.#queue.length === 0) return;
    this.#scheduled = true;
    // The end of this turn: every call made during it joins the group.
    setImmediate(() => {
      this.#scheduled = false;
      this.#startGroup();
    });
  }

  #startGroup(): void {
    if (this.#inFlight >= this.#maxInFlight || this.#queue.length === 0) return;
    const group = this.#queue.splice(0, this.#maxBatch);
    this.#inFlight += 1;
    void this.#run(group).finally(() => {
      this.#inFlight -= 1;
      this.#schedule();
    });
    this.#schedule();
  }

  async #run(group: Pending<Item, Result>[]): Promise<void> {
    if (group.length > 1) {
      let results: Result[] | null = null;
      try {
        results = await this.#runner.group(group.map((p) => p.item));
      } catch {
        // Nothing of the group is known to be done: each on its own (below).
      }
      if (results !== null) {
        for (const [i, pending] of group.entries()) pending.resolve(results[i]!);
        return;
      }
    }
    await Promise.all(group.map((pending) => this.#runner.one(pending.item).then(pending.resolve, pending.reject)));
  }
}
