import { describe, expect, it } from "vitest";
import { ServerShuttingDownError } from "../../http/errors.ts";
import { JobReleasedError, type RunningJob } from "./runningJob.ts";
import { ClientFollowers } from "./clientFollowers.ts";

/** A follow that waits until it is released, then throws as a released follow does. */
function waitingFollow(): RunningJob {
  let release: () => void = () => undefined;
  const released = new Promise<never>((_, reject) => (release = () => reject(new JobReleasedError())));
  released.catch(() => undefined);
  return { completionId: "chatcmpl-1", next: () => released, release: () => release() };
}

describe("ClientFollowers.interruptAll", () => {
  it("ends every open follow with ServerShuttingDownError, and one taken afterwards at once", async () => {
    const followers = new ClientFollowers(10);
    const open = followers.take("a", waitingFollow);
    const pending = open.next();
    expect(followers.interruptAll()).toBe(1);
    await expect(pending).rejects.toBeInstanceOf(ServerShuttingDownError);
    const later = followers.take("a", waitingFollow);
    await expect(later.next()).rejects.toBeInstanceOf(ServerShuttingDownError);
    later.release();
    open.release();
    expect(followers.open("a")).toBe(0);
  });
});
