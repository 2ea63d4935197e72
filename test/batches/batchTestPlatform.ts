import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";

/**
 * The test platform (startTestPlatform) with the batch dispatcher its API process runs, started; close()
 * stops the dispatcher, then the platform.
 */
export class BatchTestPlatform {
  readonly platform: TestPlatform;
  #dispatcher: BatchDispatcher;

  private constructor(platform: TestPlatform) {
    this.platform = platform;
    this.#dispatcher = this.#startDispatcher();
  }

  static async start(options: Parameters<typeof startTestPlatform>[0]): Promise<BatchTestPlatform> {
    return new BatchTestPlatform(await startTestPlatform(options));
  }

  /** Stops the dispatcher (its lines handed over at once, their jobs going on), as a stopping API process does. */
  async stopDispatcher(): Promise<void> {
    await this.#dispatcher.stop();
  }

  /** A new dispatcher takes over (an API process started after one stopped). */
  restartDispatcher(): void {
    this.#dispatcher = this.#startDispatcher();
  }

  async close(): Promise<void> {
    await this.#dispatcher.stop();
    await this.platform.close();
  }

  #startDispatcher(): BatchDispatcher {
    const dispatcher = new BatchDispatcher(this.platform.deps, this.platform.inference, this.platform.deps.files!);
    dispatcher.start();
    return dispatcher;
  }
}
