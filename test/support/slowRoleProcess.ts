import { runRoles } from "../../src/runtime/runRoles.ts";

/**
 * A process running one role whose stop takes STOP_MS milliseconds (never, if "never"), for the
 * graceful-shutdown tests: `node test/support/slowRoleProcess.ts` with DATABASE_URL and SHUTDOWN_GRACE_MS
 * set. Prints "started" once the role runs.
 */
const stopMs = process.env.STOP_MS ?? "never";
runRoles([
  {
    name: "slow",
    needsRedis: false,
    poolUse: "background",
    start: async () => {
      // Work in progress keeps the process alive, as a real role's server or loop does.
      const work = setInterval(() => undefined, 1000);
      process.stdout.write("started\n");
      return {
        stop: () =>
          new Promise<void>((resolve) => {
            if (stopMs === "never") return;
            setTimeout(() => {
              clearInterval(work);
              resolve();
            }, Number(stopMs));
          }),
      };
    },
  },
]);
