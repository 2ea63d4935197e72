import { Gauge, type Registry } from "prom-client";

/** What a pg Pool exposes about its connections (pg-pool's public counters). */
export type PoolCounts = { totalCount: number; idleCount: number; waitingCount: number };

/** What an ioredis connection exposes about itself. */
export type RedisStatus = { status: string };

/** Jobs of one model's queue by BullMQ state (Queue.getJobCounts). */
export type QueueDepth = {
  model: string;
  counts: Record<string, number>;
  /** Waiting jobs by scheduling lane (interactive, background, batch), when known. */
  lanes?: Record<string, number>;
};

/** Open Batch API lines of one model by state (waiting: not started or to be started again; running: claimed by a dispatcher). */
export type BatchLineCounts = { model: string; waiting: number; running: number };

/** How far one projection is behind the event log. */
export type ProjectionLag = { projection: string; eventsBehind: number; secondsBehind: number };

/**
 * The things whose state is read when Prometheus scrapes (not counted as they happen): each role adds
 * its pools, Redis connections, queues and projections while it runs; every `add` returns its removal.
 * Per registry (per process), never global.
 */
export type ScrapeSources = {
  addPool(name: string, pool: PoolCounts): () => void;
  addRedis(name: string, redis: RedisStatus): () => void;
  addQueueDepth(read: () => Promise<QueueDepth[]>): () => void;
  addProjectionLag(read: () => Promise<ProjectionLag[]>): () => void;
  addBatchLines(read: () => Promise<BatchLineCounts[]>): () => void;
};

type SourceLists = {
  pools: Map<string, PoolCounts>;
  redis: Map<string, RedisStatus>;
  queueDepth: Set<() => Promise<QueueDepth[]>>;
  projectionLag: Set<() => Promise<ProjectionLag[]>>;
  batchLines: Set<() => Promise<BatchLineCounts[]>>;
};

/** A scrape never waits longer than this for a source (a Redis or PostgreSQL that does not answer). */
const SOURCE_TIMEOUT_MS = 1000;

/** The sources of one registry, with the gauges that read them on each scrape registered in it. */
export function createScrapeSources(registry: Registry): ScrapeSources {
  const lists: SourceLists = { pools: new Map(), redis: new Map(), queueDepth: new Set(), projectionLag: new Set(), batchLines: new Set() };
  registerScrapeGauges(registry, lists);
  return {
    addPool(name, pool) {
      lists.pools.set(name, pool);
      return () => lists.pools.get(name) === pool && lists.pools.delete(name);
    },
    addRedis(name, redis) {
      lists.redis.set(name, redis);
      return () => lists.redis.get(name) === redis && lists.redis.delete(name);
    },
    addQueueDepth(read) {
      lists.queueDepth.add(read);
      return () => lists.queueDepth.delete(read);
    },
    addProjectionLag(read) {
      lists.projectionLag.add(read);
      return () => lists.projectionLag.delete(read);
    },
    addBatchLines(read) {
      lists.batchLines.add(read);
      return () => lists.batchLines.delete(read);
    },
  };
}

function registerScrapeGauges(registry: Registry, lists: SourceLists): void {
  const registers = [registry];
  const poolGauge = (name: string, help: string, read: (p: PoolCounts) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["pool"],
      registers,
      collect() {
        this.reset();
        for (const [pool, counts] of lists.pools) this.set({ pool }, read(counts));
      },
    });
  poolGauge("pg_pool_connections", "Connections of a PostgreSQL pool (open, idle or in use), by pool", (p) => p.totalCount);
  poolGauge("pg_pool_idle_connections", "Idle connections of a PostgreSQL pool, by pool", (p) => p.idleCount);
  poolGauge("pg_pool_waiting_clients", "Queries waiting for a free connection of a PostgreSQL pool, by pool", (p) => p.waitingCount);
  new Gauge({
    name: "redis_connection_ready",
    help: "1 when a Redis connection is ready for commands, 0 while it connects or reconnects, by connection",
    labelNames: ["connection"],
    registers,
    collect() {
      this.reset();
      for (const [connection, redis] of lists.redis) this.set({ connection }, redis.status === "ready" ? 1 : 0);
    },
  });
  new Gauge({
    name: "inference_queue_jobs",
    help: "Jobs in a model's queue by BullMQ state (waiting, active, delayed, prioritized, failed), read on scrape",
    labelNames: ["model", "state"],
    registers,
    async collect() {
      this.reset();
      for (const depths of await readAll(lists.queueDepth)) {
        for (const { model, counts } of depths) for (const [state, count] of Object.entries(counts)) this.set({ model, state }, count);
      }
    },
  });
  new Gauge({
    name: "inference_queue_waiting_jobs",
    help: "Jobs waiting for a worker of a model, by scheduling lane (interactive, background, batch), read on scrape",
    labelNames: ["model", "lane"],
    registers,
    async collect() {
      this.reset();
      for (const depths of await readAll(lists.queueDepth)) {
        for (const { model, lanes } of depths) for (const [lane, count] of Object.entries(lanes ?? {})) this.set({ model, lane }, count);
      }
    },
  });
  new Gauge({
    name: "batch_lines",
    help: "Batch API lines not ended yet, by model and state (waiting, running), read from PostgreSQL on scrape",
    labelNames: ["model", "state"],
    registers,
    async collect() {
      this.reset();
      // Every API process reads the same table: the first answer is the platform's count.
      const [counts] = await readAll(lists.batchLines);
      // A state with no open line has no series (rather than 0), as documented.
      for (const { model, waiting, running } of counts ?? []) {
        if (waiting > 0) this.set({ model, state: "waiting" }, waiting);
        if (running > 0) this.set({ model, state: "running" }, running);
      }
    },
  });
  const lags = { at: 0, values: Promise.resolve<ProjectionLag[][]>([]) };
  /** Both lag gauges read the same query result within one scrape. */
  const readLags = () => {
    const now = Date.now();
    if (now - lags.at > 100) {
      lags.at = now;
      lags.values = readAll(lists.projectionLag);
    }
    return lags.values;
  };
  new Gauge({
    name: "projector_lag_events",
    help: "Events of the log a projection has not applied yet, by projection",
    labelNames: ["projection"],
    registers,
    async collect() {
      this.reset();
      for (const list of await readLags()) for (const lag of list) this.set({ projection: lag.projection }, lag.eventsBehind);
    },
  });
  new Gauge({
    name: "projector_lag_seconds",
    help: "Age of the oldest event a projection has not applied yet (0 when caught up), by projection",
    labelNames: ["projection"],
    registers,
    async collect() {
      this.reset();
      for (const list of await readLags()) for (const lag of list) this.set({ projection: lag.projection }, lag.secondsBehind);
    },
  });
}

/** Every reader's answer; a reader that fails or takes longer than SOURCE_TIMEOUT_MS is left out of this scrape. */
async function readAll<T>(readers: Set<() => Promise<T>>): Promise<T[]> {
  const results: (T | undefined)[] = await Promise.all([...readers].map((read) => withinTimeout(read())));
  return results.filter((r) => r !== undefined) as T[];
}

async function withinTimeout<T>(work: Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), SOURCE_TIMEOUT_MS);
  });
  try {
    return await Promise.race([work.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}
