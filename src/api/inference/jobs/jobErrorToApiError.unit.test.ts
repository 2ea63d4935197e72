import { describe, expect, it } from "vitest";
import { jobErrorToApiError } from "./jobErrorToApiError.ts";

describe("jobErrorToApiError", () => {
  it("makes a cancelled completion a final 409: x-should-retry false, for a retried POST would start and charge a new one", () => {
    const error = jobErrorToApiError({ kind: "cancelled", message: "The completion was cancelled.", param: null });
    expect(error.status).toBe(409);
    expect(error.code).toBe("completion_cancelled");
    expect(error.headers["x-should-retry"]).toBe("false");
  });

  it("keeps an engine's refusal a 400 naming its parameter", () => {
    const error = jobErrorToApiError({ kind: "invalid_request", message: "bad", param: "logit_bias" });
    expect(error.status).toBe(400);
    expect(error.param).toBe("logit_bias");
    expect(error.headers["x-should-retry"]).toBeUndefined();
  });
});
