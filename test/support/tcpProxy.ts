import net, { type AddressInfo } from "node:net";

/**
 * What the proxy does with traffic:
 * - `pass`: forwards both ways;
 * - `refuse`: the server is gone: stops listening (a new connection is refused by the kernel,
 *   ECONNREFUSED) and closes every open connection;
 * - `blackhole`: packets are silently dropped: new connections are accepted and never forwarded, and
 *   open connections stop forwarding in both directions (what arrives is discarded), without closing.
 * - `deaf`: the answers are lost: open connections forward what the client sends but drop what the
 *   server answers (so a statement runs, and commits, without its client hearing of it); new
 *   connections as in `blackhole`.
 * - `hold`: a network partition that heals: what either side sends is held (new connections too), and
 *   delivered in order once the mode is `pass` again, as TCP retransmits after a partition.
 */
export type ProxyMode = "pass" | "refuse" | "blackhole" | "deaf" | "hold";

export type TcpProxy = {
  port: number;
  mode: ProxyMode;
  /** `url` with its host and port replaced by the proxy's. */
  rewrite(url: string): string;
  setMode(mode: ProxyMode): Promise<void>;
  /**
   * Resets every open connection (a TCP RST both ways, as a restarting pooler or a cloud idle timeout
   * does) and keeps accepting new ones. Returns how many connections it reset.
   */
  reset(): number;
  close(): Promise<void>;
};

/** A TCP proxy on 127.0.0.1 (ephemeral port) in front of `target`, for fault injection in tests. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let mode: ProxyMode = "pass";
  /** What `hold` keeps, per direction of each connection, and how to deliver it. */
  const held: { to: net.Socket; chunks: Buffer[] }[] = [];
  const forward = (to: net.Socket, chunk: Buffer) => {
    if (mode !== "hold") {
      to.write(chunk);
      return;
    }
    const queue = held.find((q) => q.to === to);
    if (queue) queue.chunks.push(chunk);
    else held.push({ to, chunks: [chunk] });
  };
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    if (mode !== "pass" && mode !== "hold") {
      // Accepted, never forwarded.
      client.on("data", () => undefined);
      return;
    }
    const upstream = net.connect(target.port, target.host);
    track(upstream);
    client.on("data", (chunk: Buffer) => {
      if (mode === "pass" || mode === "deaf" || mode === "hold") forward(upstream, chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (mode === "pass" || mode === "hold") forward(client, chunk);
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  const stopListening = () => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
  await listen(0);
  const port = (server.address() as AddressInfo).port;
  const destroyAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  const proxy: TcpProxy = {
    port,
    get mode() {
      return mode;
    },
    rewrite(url) {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      return u.toString();
    },
    async setMode(next) {
      if (next === mode) return;
      const previous = mode;
      mode = next;
      // A partition heals: what was held is delivered, in order, before anything new.
      if (previous === "hold") for (const { to, chunks } of held.splice(0)) for (const chunk of chunks) if (!to.destroyed) to.write(chunk);
      if (next === "refuse") {
        const closed = stopListening();
        destroyAll();
        await closed;
      } else if (previous === "refuse") {
        await listen(port);
      }
    },
    reset() {
      // Both ends of each forwarded connection are in `sockets`: count the client-side ones.
      const open = [...sockets];
      for (const socket of open) socket.resetAndDestroy();
      return Math.ceil(open.length / 2);
    },
    async close() {
      mode = "refuse";
      const closed = stopListening();
      destroyAll();
      await closed;
    },
  };
  return proxy;
}
