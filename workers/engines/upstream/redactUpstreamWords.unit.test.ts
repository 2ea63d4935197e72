import { describe, expect, it } from "vitest";
import { redactUpstreamWords, upstreamParam, upstreamSecrets } from "./redactUpstreamWords.ts";

describe("redactUpstreamWords", () => {
  const secrets = upstreamSecrets("http://10.0.0.5:8000/v1/", "plain-key-42");

  it("drops the upstream's key, address and anything shaped like an address or a credential", () => {
    const said = [
      "bad param plain-key-42",
      "at http://10.0.0.5:8000/v1/chat/completions",
      "host vllm.internal:8000 and 192.168.1.7",
      "header Bearer abc.def",
      "key sk-upstream-SECRET",
      "token 0123456789abcdef0123456789abcdef01",
      "[fe80::1]:8000",
      "Incorrect API key provided: sk-upstr**********T123",
      "internal validation at /srv/vllm/secret_path.py",
    ].join("; ");
    const redacted = redactUpstreamWords(said, secrets);
    for (const leak of [
      "plain-key-42",
      "10.0.0.5",
      "vllm.internal",
      "192.168",
      "abc.def",
      "SECRET",
      "0123456789abcdef",
      "fe80",
      "T123",
      "secret_path",
      "/srv",
    ]) {
      expect(redacted, leak).not.toContain(leak);
    }
    expect(redacted).toContain("bad param [redacted]");
  });

  it("keeps a refusal's words readable", () => {
    const vllm = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).";
    expect(redactUpstreamWords(vllm, secrets)).toBe(vllm);
    expect(redactUpstreamWords("temperature must be at most 2", secrets)).toBe("temperature must be at most 2");
  });

  it("cuts a long message to 500 characters", () => {
    expect(redactUpstreamWords("x ".repeat(1000), []).length).toBe(501);
  });

  it("keeps a param that is a field path, nothing else", () => {
    expect(upstreamParam("response_format.type")).toBe("response_format.type");
    expect(upstreamParam("messages[0].content")).toBe("messages[0].content");
    expect(upstreamParam("see http://10.0.0.5")).toBeNull();
    expect(upstreamParam(null)).toBeNull();
  });
});
