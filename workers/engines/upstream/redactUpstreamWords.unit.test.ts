import { describe, expect, it } from "vitest";
import { redactUpstreamWords, upstreamParam, upstreamSecrets } from "./redactUpstreamWords.ts";

describe("redactUpstreamWords", () => {
  const secrets = upstreamSecrets("http://10.0.0.5:8000/v1/", "upstreamSecretKey42xyz");

  it("drops the upstream's key (in any case, split by punctuation, in base64), its address and anything shaped like an address or a credential", () => {
    // What two probes sent in an upstream's 400.
    const leaks: [said: string, secret: string][] = [
      ["bad param upstreamSecretKey42xyz", "SecretKey42"],
      ["key UPSTREAMSECRETKEY42XYZ", "SECRETKEY42"],
      ["key upstream.Secret-Key.42xyz", "42xyz"],
      ["key upstream-Secret-Key-42-xyz", "42-xyz"],
      [`key ${Buffer.from("upstreamSecretKey42xyz").toString("base64")}`, "dXBzdHJlYW1TZWNyZXRLZXk0Mnh5eg"],
      ["at http://10.0.0.5:8000/v1/chat/completions", "10.0.0.5"],
      ["host vllm.internal:8000 and 192.168.1.7", "vllm.internal"],
      ["and 192.168.1.7", "192.168"],
      ["header Bearer abc.def", "abc.def"],
      ["Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"],
      ["api_key=hunter2hunter2", "hunter2"],
      ["key sk-upstream-SECRET", "SECRET"],
      ["Schlüssel_sk-live-abcDEF123", "abcDEF123"],
      ["id_sk-live-abcdefgh1234", "abcdefgh1234"],
      ["xsk-abc123456", "abc123456"],
      ["Incorrect API key provided: sk-upstr**********T123", "T123"],
      ["aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"],
      ["secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"],
      ["jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.abc", "eyJhbGciOiJIUzI1NiJ9"],
      ["token 0123456789abcdef0123456789abcdef01", "0123456789abcdef"],
      ["v6 [fe80::1]:8000", "fe80"],
      ["v6 2001:db8::7 here", "2001:db8"],
      ["v6 fd00:1234:5678::42 here", "5678"],
      ["node gpu-node-7.corp.internal down", "gpu-node-7"],
      ["node vllm-3.svc down", "vllm-3"],
      ["internal validation at /srv/vllm/secret_path.py", "secret_path"],
      ["model C:\\models\\secret\\llama.gguf", "llama.gguf"],
      // A second re-probe's.
      ["bad key upstream%53ecret%4Bey42xyz", "42xyz"],
      [`bad key ${encodeURIComponent("upstream-Secret/Key42xyz")}`, "Key42xyz"],
      ["part SecretKey42xyz only", "SecretKey42"],
      ["Invalid token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "abcdefghijklmnop"],
      ["cannot open models/private/llama.gguf", "private"],
      ["mail ops-admin@acme.io", "ops-admin"],
    ];
    for (const [said, secret] of leaks) expect(redactUpstreamWords(said, secrets), said).not.toContain(secret);
    expect(redactUpstreamWords("bad param upstreamSecretKey42xyz", secrets)).toBe("bad param [redacted]");
  });

  it("keeps a refusal's words readable", () => {
    const readable = [
      "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).",
      "temperature must be at most 2",
      "max_tokens: Input should be less than or equal to 4096",
      "Extra key: 'foo' is not permitted",
      "the request exceeds the available context size, try increasing it",
      "requested 10005 tokens",
      "std::vector<int> is not JSON",
      'grammar error: root ::= "a" does not parse',
      "resets at 12:30:45 UTC",
      "JSON parse error at 1:15: unexpected token",
      "Invalid key: 'messages[0]' is not allowed",
      "use top-k:40 or less",
      "content-type must be application/json",
    ];
    for (const said of readable) expect(redactUpstreamWords(said, secrets), said).toBe(said);
  });

  it("cuts a long message to 500 characters, never between the halves of a surrogate pair, and leaves no NUL", () => {
    expect(redactUpstreamWords("x ".repeat(1000), []).length).toBe(501);
    const cut = redactUpstreamWords(`${"a".repeat(499)}😀 and more`, []);
    expect(cut).toBe(`${"a".repeat(499)}…`);
    expect(redactUpstreamWords("a\u0000b\ud800c", [])).toBe("a\uFFFDb\uFFFDc");
  });

  it("keeps a param that is a field path naming nothing to hide, nothing else", () => {
    expect(upstreamParam("response_format.type", secrets)).toBe("response_format.type");
    expect(upstreamParam("messages[0].content", secrets)).toBe("messages[0].content");
    expect(upstreamParam("see http://10.0.0.5", secrets)).toBeNull();
    expect(upstreamParam("upstreamSecretKey42xyz", secrets)).toBeNull();
    expect(upstreamParam("body.sk-live-abcdef12", secrets)).toBeNull();
    expect(upstreamParam(null, secrets)).toBeNull();
  });
});
