import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

/** Every event enters the log through appendToStream: no other product code writes the log's tables. */
describe("the event log's write path", () => {
  it("only appendToStream inserts into es_events or creates and moves es_streams", () => {
    const writers = execFileSync("git", ["grep", "-liE", "(insert into|update|delete from) +es_(events|streams)", "--", "src", "workers", "projections"], {
      encoding: "utf8",
    })
      .split("\n")
      .filter((file) => file && !file.endsWith(".test.ts"));
    expect(writers).toEqual(["src/ledger/eventStore/appendToStream.ts"]);
  });
});
