/**
 * V8 flags the service's processes run with (`npm start` and the role scripts in package.json, the
 * Dockerfile's CMD, the roles of docker-compose.yml, and the bench's platform processes; a unit test
 * keeps them in step).
 *
 * --max-semi-space-size=4 (MB): a smaller young generation. With the default, the worker's scavenges
 * took 9-18 ms each, about every 35 s at one stream, and every stream of the process stalled for
 * that long; with 4 MB they are shorter and more frequent. Measured with `npm run bench`: 32-stream
 * steady added TTFT p99 +28.7 / +19.2 ms without -> +12.5 / +8.9 / +14.3 ms with; the price: the
 * 256-stream burst throughput went from 0.74x / 0.70x to 0.68x / 0.67x / 0.64x of direct.
 *
 * Not --single-threaded-gc: V8 keeps its parallel scavenge and concurrent marking
 * and sweeping threads. Collecting on the main thread only had measured better for first-token p99 at
 * 32 streams with the API and worker in two small processes, but with `npm start`'s one process holding
 * 512 long streams (a heap of about 300 MB) its major collections paused every stream: `npm run bench
 * -- --workload long-streams`, same session: inter-token gap p99 169.9 ms with it (one run), 97.0,
 * 125.6 and 125.2 ms without (three runs; the bare proxy 54.5 to 69.8), memory per open stream 265 KiB
 * with it, 164 to 271 without; the closed-loop
 * workload the same within its noise (256 clients 376 vs 386 requests/s, 3.13 vs 3.16 ms of CPU per
 * request; 32 clients 114.5 vs 115.1 requests/s).
 */
export const SERVICE_NODE_FLAGS = ["--max-semi-space-size=4"] as const;

/** What every service process loads before its entry point: OpenTelemetry's register module (it installs nothing unless tracing is configured). */
export const SERVICE_PRELOAD = ["--import", "./src/observability/register.ts"] as const;
