import { InvalidRequestError } from "../http/errors.ts";

/** A file past the store's byte or line limit: refused, nothing stored. 400 `file_too_large`, as OpenAI answers it. */
export class FileTooLargeError extends InvalidRequestError {
  readonly limit: "bytes" | "lines";
  constructor(limit: "bytes" | "lines", max: number) {
    super(
      limit === "bytes" ? `The file is too large: files may have at most ${max} bytes.` : `The file has too many lines: files may have at most ${max} lines.`,
      { param: "file", code: "file_too_large" },
    );
    this.limit = limit;
  }
}
