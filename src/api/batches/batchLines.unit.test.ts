import { describe, expect, it } from "vitest";
import { InternalApiError, InvalidRequestError, ModelUnavailableError } from "../http/errors.ts";
import { lineRetryDelay, MAX_INTERNAL_FAILURE_ATTEMPTS } from "./batchLines.ts";

describe("lineRetryDelay", () => {
  it("runs a line again after an internal error, up to MAX_INTERNAL_FAILURE_ATTEMPTS runs, then lets it fail", () => {
    const internal = new InternalApiError("The model failed while generating.");
    for (let attempts = 1; attempts < MAX_INTERNAL_FAILURE_ATTEMPTS; attempts++) expect(lineRetryDelay(internal, attempts)).toBeGreaterThan(0);
    expect(lineRetryDelay(internal, MAX_INTERNAL_FAILURE_ATTEMPTS)).toBeNull();
  });

  it("waits out an unavailable platform however long (until the window ends), and never runs the line's own 4xx again", () => {
    const unavailable = new ModelUnavailableError("The model is not served right now.");
    expect(lineRetryDelay(unavailable, 1)).toBe(1000);
    expect(lineRetryDelay(unavailable, 500)).toBe(30_000);
    expect(lineRetryDelay(new InvalidRequestError("bad"), 1)).toBeNull();
  });
});
