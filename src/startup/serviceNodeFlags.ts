/**
 * V8 flags the service's processes run with (`npm start` and the role scripts in package.json, the
 * Dockerfile's CMD, and the bench's platform processes; a unit test keeps them in step).
 *
 * --max-semi-space-size=4 (MB): a smaller young generation. With the default, the worker's scavenges
 * took 9-18 ms each, about every 35 s at one stream, and every stream of the process stalled for
 * that long; with 4 MB they are shorter and more frequent. Measured with `npm run bench`: 32-stream
 * steady added TTFT p99 +28.7 / +19.2 ms without -> +12.5 / +8.9 / +14.3 ms with; the price: the
 * 256-stream burst throughput went from 0.74x / 0.70x to 0.68x / 0.67x / 0.64x of direct.
 */
export const SERVICE_NODE_FLAGS = ["--max-semi-space-size=4"] as const;
