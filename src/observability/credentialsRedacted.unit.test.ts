import { describe, expect, it } from "vitest";
import { credentialsRedacted } from "./credentialsRedacted.ts";

const KEY = `sk-${"aB3".repeat(16)}x`;

describe("credentialsRedacted", () => {
  it("takes out keys and tokens however a client sent them: plain, percent-encoded, after a word character, without their prefix", () => {
    for (const said of [
      `Unknown request URL: GET /v1/${KEY}.`,
      `Unknown request URL: GET /v1/sk%2D${KEY.slice(3)}.`,
      `Unknown request URL: GET /v1/%73k-${KEY.slice(3)}.`,
      `No API key with id 'id_${KEY}'.`,
      `The model '${KEY.slice(3)}' does not exist`,
      `session sess_${"x".repeat(43)}`,
    ]) {
      expect(credentialsRedacted(said), said).not.toMatch(/aB3aB3aB3|xxxxxxxxxx/);
      expect(credentialsRedacted(said)).toContain("REDACTED");
    }
  });

  it("leaves what is no credential as it is", () => {
    for (const said of [
      "No completion with id 'chatcmpl-AbCdEfGhIjKlMnOpQrStUvWx'.",
      "Unknown request URL: GET /v1/chat/completion.",
      "task-force and desk-top",
    ]) {
      expect(credentialsRedacted(said)).toBe(said);
    }
  });
});
