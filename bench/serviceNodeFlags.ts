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
 * --single-threaded-gc: V8 collects on the main thread only (no parallel scavenge, no concurrent
 * marking or sweeping threads). On this 2-core machine, where API, worker, Redis, PostgreSQL and the
 * engine share the cores, the helper threads waited for a core and the main thread waited for them:
 * the worker's major collections paused up to 32 ms. Measured with `npm run bench` in one session
 * (32 streams: two alternating runs each; 256 streams: one run each): 32-stream steady added TTFT
 * p99 +28.8 / +18.0 ms without -> +7.6 / +10.4 ms with; 256 streams steady TTFT p50 +55.8 -> +21.8
 * ms, burst +203 -> +136 ms and 0.66x -> 0.71x of the direct tokens/s. On a machine with many idle
 * cores the parallel collector may do better: measure before changing it there.
 */
export const SERVICE_NODE_FLAGS = ["--max-semi-space-size=4", "--single-threaded-gc"] as const;

/** What every service process loads before its entry point: OpenTelemetry's register module (it installs nothing unless tracing is configured). */
export const SERVICE_PRELOAD = ["--import", "./src/observability/register.ts"] as const;
