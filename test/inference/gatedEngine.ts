import type { Engine } from "../../workers/engines/engine.ts";
import { withChat } from "./withChat.ts";

/**
 * Wraps a real engine so its chat deltas are held back: the real generation runs first, then delta i is
 * passed on only once `gate.allowed` exceeds i (the test raises it); an abort ends the wait with its reason.
 */
export function gatedEngine(inner: Engine, gate: { allowed: number }): Engine {
  return withChat(inner, async (request, onDelta, signal, options) => {
    const deltas: Parameters<typeof onDelta>[0][] = [];
    const result = await inner.chat(request, (delta) => deltas.push(delta), signal, options);
    for (const [index, delta] of deltas.entries()) {
      while (index >= gate.allowed) {
        if (signal.aborted) throw signal.reason;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      onDelta(delta);
    }
    return result;
  });
}
