import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import type { Llama } from "node-llama-cpp";

export type LlamaBindingOptions = {
  /**
   * "auto" / true: CUDA, Vulkan or Metal when the host has one and its prebuilt binding is installed
   * (@node-llama-cpp/linux-x64-cuda, ...-vulkan, mac-arm64-metal), else the CPU, without a message. false: CPU only.
   * A named backend that is missing fails.
   */
  gpu: boolean | "auto" | "cuda" | "vulkan" | "metal";
  logger?: (level: LlamaLogLevel, message: string) => void;
};

/**
 * Loads the llama.cpp binding from the prebuilt binaries (never compiles, never downloads). On Linux this tests
 * the binary in a child process first, which takes a second or two: create it once per worker process and pass
 * it to every EmbeddedEngine.load, so loading a model then costs only the model itself.
 */
export async function createLlama(options: LlamaBindingOptions = { gpu: "auto" }): Promise<Llama> {
  return getLlama({
    gpu: options.gpu === true ? "auto" : options.gpu,
    build: "never",
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
}
