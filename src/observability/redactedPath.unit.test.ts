import { describe, expect, it } from "vitest";
import { redactedPath } from "./redactedPath.ts";

describe("redactedPath", () => {
  it("keeps a route's words and the platform's ids", () => {
    for (const path of [
      "/v1/chat/completions/chatcmpl-AbCdEfGhIjKlMnOpQrStUvWx",
      "/v1/responses/resp_0123456789abcdef01234567/input_items",
      "/api/v1/accounts/user/api-keys/5f0c7a1e-3b1d-4c62-9a57-0d7e1f2a3b4c/revoke",
      "/v1/files/file-AbCdEfGhIjKlMnOpQrStUvWx/content",
      "/",
    ]) {
      expect(redactedPath(path)).toBe(path);
    }
  });

  it("replaces a segment that may be a credential, encoded or not", () => {
    const key = `sk-${"a1B2".repeat(12)}x`;
    expect(redactedPath(`/v1/${key}`)).toBe("/v1/REDACTED");
    expect(redactedPath(`/${encodeURIComponent(key).replace("s", "%73")}/models`)).toBe("/REDACTED/models");
    expect(redactedPath("/v1/sess_shortish")).toBe("/v1/REDACTED");
    expect(redactedPath(`/v1/${"Z".repeat(41)}`)).toBe("/v1/REDACTED");
    expect(redactedPath("/v1/a%20b/%E0%A4%A")).toBe("/v1/REDACTED/REDACTED");
  });
});
