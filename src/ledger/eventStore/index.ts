export { appendToNewStreams, type NewStreamAppend, type NewStreamOutcome } from "./appendToNewStreams.ts";
export { appendToStream } from "./appendToStream.ts";
export { ConcurrencyError } from "./concurrencyError.ts";
export { handleCommand, type Decider, type HandleCommandOptions, type HandleCommandResult } from "./handleCommand.ts";
export { compareLogPositions, LOG_START, positionOf, type LogPosition } from "./logPosition.ts";
export { readAll, readAllInSnapshot } from "./readAll.ts";
export { readStream, type StreamRead } from "./readStream.ts";
export type * from "./types.ts";
