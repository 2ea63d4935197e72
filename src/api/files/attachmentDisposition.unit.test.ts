import { describe, expect, it } from "vitest";
import { attachmentDisposition } from "./attachmentDisposition.ts";

describe("attachmentDisposition", () => {
  it("keeps a plain name as it is", () => {
    expect(attachmentDisposition("batch_input.jsonl")).toBe('attachment; filename="batch_input.jsonl"');
  });

  it("gives a name with other characters whole in filename*, ASCII in filename", () => {
    expect(attachmentDisposition('ünï cödé "q".jsonl')).toBe(
      `attachment; filename="_n_ c_d_ _q_.jsonl"; filename*=UTF-8''%C3%BCn%C3%AF%20c%C3%B6d%C3%A9%20%22q%22.jsonl`,
    );
  });

  it("never names a path: only the last segment", () => {
    expect(attachmentDisposition("../../etc/passwd")).toBe('attachment; filename="passwd"');
    expect(attachmentDisposition("C:\\Users\\x\\in.jsonl")).toBe('attachment; filename="in.jsonl"');
    expect(attachmentDisposition("..")).toBe('attachment; filename="file"');
  });
});
