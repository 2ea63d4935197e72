import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { RedisTarget } from "../../src/redis/redisTarget.ts";

const run = promisify(execFile);

/** A private Redis Cluster of masters (and replicas, if asked for) on loopback ports of its own (see startRedisCluster). */
export type RedisCluster = {
  ports: number[];
  /** Kills (SIGKILL) the master that serves `key`'s slot now; its replica takes over after the node timeout. Answers its port. */
  killMasterOf(key: string): Promise<number>;
  target: Extract<RedisTarget, { mode: "cluster" }>;
  /** Kills every node (SIGKILL, like a crash; their data is lost, their cluster configuration kept). */
  kill(): Promise<void>;
  /** Starts the killed nodes again on their ports and waits until the cluster is ok again. */
  restart(): Promise<void>;
  /** Stops the servers started here (by their process handles) and removes their directory. */
  stop(): Promise<void>;
};

/**
 * Starts `masters` redis-servers with cluster mode on free loopback ports (each port + 10000, the
 * cluster bus, free too), and `replicas` per master, joins them with `redis-cli --cluster create` and
 * waits until every node reports cluster_state:ok (and, with replicas, every master has its own).
 */
export async function startRedisCluster(masters = 3, options: { replicas?: number; nodeTimeoutMs?: number } = {}): Promise<RedisCluster> {
  const replicas = options.replicas ?? 0;
  const dir = await mkdtemp(path.join(tmpdir(), "redis-cluster-"));
  const children = new Map<number, ChildProcess>();
  const ports: number[] = [];
  const startNode = (port: number) => {
    const nodeDir = path.join(dir, String(port));
    const args = ["--port", String(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes", "--cluster-config-file", path.join(nodeDir, "nodes.conf")];
    args.push("--cluster-node-timeout", String(options.nodeTimeoutMs ?? 5000), "--save", "", "--appendonly", "no", "--dir", nodeDir);
    children.set(port, spawn("redis-server", args, { stdio: "ignore" }));
  };
  const clusterOk = () =>
    Promise.all(ports.map((port) => waitFor(async () => (await cli(port, "CLUSTER", "INFO")).includes("cluster_state:ok"), `node ${port} cluster_state:ok`)));
  const kill = async () => {
    await Promise.all([...children.values()].map(stopChild));
    children.clear();
  };
  const stop = async () => {
    await kill();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const port = await freeClusterPort(ports);
      ports.push(port);
      await mkdir(path.join(dir, String(port)));
      startNode(port);
    }
    await Promise.all(ports.map((port) => waitFor(async () => (await cli(port, "PING")) === "PONG", `node ${port} answers PING`)));
    await run("redis-cli", ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", String(replicas), "--cluster-yes"], {
      timeout: 30_000,
    });
    await clusterOk();
    if (replicas > 0) {
      // Every replica known to every node as such (the gossip takes a moment after the create).
      await waitFor(
        async () => (await cli(ports[0]!, "CLUSTER", "NODES")).split("\n").filter((l) => / slave /.test(l)).length === masters * replicas,
        "replicas joined",
      );
      // ...and each replica in sync with its master (one whose master dies before its first sync is never promoted).
      await Promise.all(
        ports.map((port) =>
          waitFor(async () => {
            const info = await cli(port, "INFO", "replication");
            return info.includes("role:master") || info.includes("master_link_status:up");
          }, `node ${port} in sync`),
        ),
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    ports,
    target: { mode: "cluster", nodes: ports.map((port) => ({ host: "127.0.0.1", port })), tls: false },
    kill,
    async killMasterOf(key: string) {
      const alive = ports.filter((port) => children.has(port));
      const slot = Number(await cli(alive[0]!, "CLUSTER", "KEYSLOT", key));
      const master = (await cli(alive[0]!, "CLUSTER", "NODES"))
        .split("\n")
        .map((line) => line.split(" "))
        .find((fields) => fields[2]!.includes("master") && !fields[2]!.includes("fail") && fields.slice(8).some((range) => inRange(range, slot)));
      if (!master) throw new Error(`no master serves slot ${slot}`);
      const port = Number(/:(\d+)@/.exec(master[1]!)![1]);
      await stopChild(children.get(port)!);
      children.delete(port);
      return port;
    },
    async restart() {
      for (const port of ports) if (!children.has(port)) startNode(port);
      await clusterOk();
    },
    stop,
  };
}

async function cli(port: number, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args], { timeout: 5_000 });
    return stdout.trim();
  } catch {
    return "";
  }
}

/** Whether a CLUSTER NODES slot field (`5461-10922` or `42`) holds `slot`. */
function inRange(range: string, slot: number): boolean {
  const [from, to] = range.split("-").map(Number);
  return from !== undefined && !Number.isNaN(from) && slot >= from && slot <= (to ?? from);
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await exited;
}

/** A free loopback port whose cluster bus port (+10000) is free too, not among `taken`. */
async function freeClusterPort(taken: number[]): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await listenOnce(0);
    if (port + 10000 > 65535 || taken.includes(port) || taken.includes(port + 10000) || taken.includes(port - 10000)) continue;
    if ((await listenOnce(port + 10000).catch(() => 0)) === 0) continue;
    return port;
  }
  throw new Error("no free port pair for a cluster node");
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(port, "127.0.0.1", () => {
      const { port: bound } = probe.address() as AddressInfo;
      probe.close(() => resolve(bound));
    });
  });
}
