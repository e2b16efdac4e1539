// What every HTTP child of the benchmarks does around its own handler: listen
// on a loopback port, report `{ url }` to the parent over IPC, and close when
// the parent sends SIGTERM or goes away, so that no child outlives a run.
// The two floor proxies share `forwardRequest` too: the least a Node proxy
// does on the gateway's stack (node:http in, undici's pooled keep-alive
// connections out), so that the floor rows differ only in how they answer.
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { Pool, type Dispatcher } from "undici";

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

export function upstreamPool(origin: string): Pool {
  return new Pool(origin, { connections: 128, keepAliveTimeout: 30_000 });
}

/**
 * Reads the whole request body and sends it on as a POST to the same path;
 * `answer` writes the upstream's answer to `res`, and a failed upstream call
 * is a 502.
 */
export function forwardRequest(
  upstream: Pool,
  req: IncomingMessage,
  res: ServerResponse,
  answer: (upstreamAnswer: Dispatcher.ResponseData) => void | Promise<void>,
): void {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.once("end", () => {
    upstream
      .request({
        path: req.url!,
        method: "POST",
        headers: { "content-type": req.headers["content-type"] ?? "application/json" },
        body: Buffer.concat(chunks),
      })
      .then(answer)
      .catch(() => res.writeHead(502).end());
  });
}
