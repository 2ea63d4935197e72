/**
 * V8 flags the service's processes run with (`npm start` and the role scripts in package.json, the
 * Dockerfile's CMD, the roles of docker-compose.yml, and the bench's platform processes; a unit test
 * keeps them in step).
 *
 * --max-semi-space-size=16 (MB): the young generation's size. It was 4 while the API and the worker ran
 * as two small processes: the worker's scavenges then took 9-18 ms with the default size and stalled
 * every stream of the process (32-stream first-token p99 +28.7 / +19.2 ms without, +12.5 / +8.9 / +14.3
 * with), at some cost in throughput. With `npm start`'s one process carrying every role, a 4 MB young
 * generation is collected far more often and promotes more to the old generation: `npm run bench` on
 * the same machine, alternating, medians of 3-4 runs each for 4 / 16 / 32 MB: 256 clients 274 / 292 /
 * 306 requests/s and 4.95 / 4.56 / 4.33 ms of CPU per request (platform + PostgreSQL + Redis); 32
 * clients first-token p50 +46 / +41 / +37 ms, p99 +81 / +70 / +97 ms; 512 long streams 0.88x / 0.92x /
 * 0.93x of direct's tokens/s, gap p99 +137 / +119 / +96 ms over the bare proxy's
 * (docs/benchmarks.md). 16 keeps most of the gain at half the young generation's memory of 32 and
 * without its 32-client p99.
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
export const SERVICE_NODE_FLAGS = ["--max-semi-space-size=16"] as const;

/** What every service process loads before its entry point: OpenTelemetry's register module (it installs nothing unless tracing is configured). */
export const SERVICE_PRELOAD = ["--import", "./src/observability/register.ts"] as const;
