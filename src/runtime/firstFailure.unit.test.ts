import { describe, expect, it } from "vitest";
import { firstFailure } from "./firstFailure.ts";

describe("firstFailure", () => {
  it("answers null once every step succeeded, and at once for none", async () => {
    expect(await firstFailure([Promise.resolve(1), new Promise((resolve) => setTimeout(resolve, 5))])).toBeNull();
    expect(await firstFailure([])).toBeNull();
  });

  it("answers the first failure without waiting for the steps still going", async () => {
    const never = new Promise(() => undefined);
    const refused = new Error("queue_full");
    expect(await firstFailure([never, Promise.reject(refused), never])).toEqual({ reason: refused });
  });
});
