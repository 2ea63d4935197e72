/**
 * Whether this API process is draining (told to stop: its shutdown grace runs). While it drains, /readyz
 * answers 503 `draining` (a load balancer that probes a kept-alive connection stops sending it requests)
 * and every answer carries `Connection: close` (a client whose pooled connection still reaches this
 * process opens its next one elsewhere, instead of being told `server_shutting_down` again).
 */
export class ApiShutdown {
  #draining = false;

  /** The shutdown began (once; for good). */
  begin(): void {
    this.#draining = true;
  }

  get draining(): boolean {
    return this.#draining;
  }
}
