import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

/**
 * Every event enters the log through the event store's append (appendToStream, and appendToNewStreams,
 * its form for many new streams in one statement): no other product code writes the log's tables.
 */
describe("the event log's write path", () => {
  it("only the event store's appends insert into es_events or create and move es_streams", () => {
    const writers = execFileSync("git", ["grep", "-liE", "(insert into|update|delete from) +es_(events|streams)", "--", "src", "workers", "projections"], {
      encoding: "utf8",
    })
      .split("\n")
      .filter((file) => file && !file.endsWith(".test.ts"));
    expect(writers).toEqual(["src/ledger/eventStore/appendToNewStreams.ts", "src/ledger/eventStore/appendToStream.ts"]);
  });
});
