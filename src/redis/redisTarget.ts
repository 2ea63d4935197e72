import { z } from "zod";

export const RedisNodeSchema = z.object({ host: z.string().min(1), port: z.number().int().min(1).max(65535) });
export type RedisNode = z.infer<typeof RedisNodeSchema>;

/** Credentials and TLS of the servers of a cluster or behind Sentinel (a single server takes them from its URL). */
export const RedisAuthSchema = z.object({
  username: z.string().optional(),
  password: z.string().optional(),
  tls: z.boolean(),
});

/**
 * Where Redis is: one server (REDIS_URL, the default), a Redis Cluster (REDIS_CLUSTER_NODES: some of its
 * nodes; the others are discovered), or a master found through Sentinel (REDIS_SENTINELS and
 * REDIS_SENTINEL_NAME). src/redis/createRedis.ts makes the matching ioredis client.
 */
export const RedisTargetSchema = z.discriminatedUnion("mode", [
  z.object({ mode: z.literal("single"), url: z.string() }),
  RedisAuthSchema.extend({ mode: z.literal("cluster"), nodes: z.array(RedisNodeSchema).min(1) }),
  RedisAuthSchema.extend({
    mode: z.literal("sentinel"),
    sentinels: z.array(RedisNodeSchema).min(1),
    name: z.string().min(1),
    sentinelPassword: z.string().optional(),
  }),
]);
export type RedisTarget = z.infer<typeof RedisTargetSchema>;

/** "host:port,host:port" (IPv6 as "[::1]:7000") -> nodes; throws a message naming the bad entry. */
export function parseRedisNodes(list: string): RedisNode[] {
  const entries = list
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (!entries.length) throw new Error("expected host:port[,host:port...]");
  return entries.map((entry) => {
    const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(entry);
    const port = Number(match?.[3]);
    if (!match || port < 1 || port > 65535) throw new Error(`expected host:port, got "${entry}"`);
    return { host: match[1] ?? match[2]!, port };
  });
}

/** For messages and logs: where Redis is, without credentials. */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.mode === "single") return redactedUrl(target.url);
  if (target.mode === "cluster") return `Redis Cluster ${target.nodes.map(nodeText).join(",")}`;
  return `Sentinel master "${target.name}" via ${target.sentinels.map(nodeText).join(",")}`;
}

const nodeText = (node: RedisNode): string => (node.host.includes(":") ? `[${node.host}]:${node.port}` : `${node.host}:${node.port}`);

function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(invalid URL)";
  }
}
