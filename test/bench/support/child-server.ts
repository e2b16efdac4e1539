// What every HTTP child of the benchmarks does around its own handler: listen
// on a loopback port, report `{ url }` to the parent over IPC, and close when
// the parent sends SIGTERM or goes away, so that no child outlives a run.
import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";

export interface ChildServerOptions {
  /** The server's keep-alive, longer than its client's so the client closes first. */
  keepAliveTimeoutMs?: number;
}

export function serveChild(handler: RequestListener, options: ChildServerOptions = {}): void {
  const server = createServer(handler);
  if (options.keepAliveTimeoutMs !== undefined)
    server.keepAliveTimeout = options.keepAliveTimeoutMs;
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo;
    process.send!({ url: `http://127.0.0.1:${port}` });
  });
  const stop = () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("disconnect", stop);
}

/** The runtime's Fastify default, longer than the gateway's upstream keep-alive. */
export const RUNTIME_KEEP_ALIVE_MS = 72_000;
