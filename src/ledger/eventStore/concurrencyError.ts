export class ConcurrencyError extends Error {
  readonly streamId: string;
  constructor(streamId: string, expected: string) {
    super(`stream ${streamId} is not at the expected version ${expected}`);
    this.name = "ConcurrencyError";
    this.streamId = streamId;
  }
}
