import { createServer as createHttpServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { Tree } from "./helpers.js";
import { onCleanup } from "./helpers.js";

export interface RecordedRequest {
  method: string;
  path: string;
  range: string | undefined;
  authorization: string | undefined;
}

/**
 * Lets a test take over a request (to fail it, cut it, redirect it). Return
 * true when the request was answered.
 */
export type Override = (
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  count: number,
) => boolean | Promise<boolean>;

export interface ModelServerOptions {
  /** Files served under `prefix`, e.g. `/models/tiny/`. */
  files: Tree;
  prefix?: string;
  /** When false the server ignores Range and always answers 200 with the whole file. */
  ranges?: boolean;
  override?: Override;
  tls?: { key: string; cert: string };
}

export interface ModelServer {
  /** Base URL of the model folder, ending in `/`. */
  url: string;
  origin: string;
  requests: RecordedRequest[];
}

/** A static file server on 127.0.0.1 with Range support, closed after the test. */
export async function startModelServer(options: ModelServerOptions): Promise<ModelServer> {
  const prefix = options.prefix ?? "/models/tiny/";
  const requests: RecordedRequest[] = [];
  const counts = new Map<string, number>();
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
    requests.push({
      method: req.method ?? "GET",
      path,
      range: req.headers.range,
      authorization: req.headers.authorization,
    });
    const count = (counts.get(path) ?? 0) + 1;
    counts.set(path, count);
    void (async () => {
      if (options.override && (await options.override(req, res, path, count))) return;
      const data = path.startsWith(prefix) ? options.files[path.slice(prefix.length)] : undefined;
      if (!data) {
        res.writeHead(404, { "content-type": "text/plain" }).end("not found");
        return;
      }
      serveBytes(req, res, data, options.ranges ?? true);
    })();
  };
  const server: Server = options.tls
    ? createHttpsServer({ key: options.tls.key, cert: options.tls.cert }, handler)
    : createHttpServer(handler);
  const origin = await listen(server, options.tls ? "https" : "http");
  return { url: `${origin}${prefix}`, origin, requests };
}

/** Answers a GET for `data`, honouring `Range: bytes=N-` when `ranges` is on. */
export function serveBytes(
  req: IncomingMessage,
  res: ServerResponse,
  data: Buffer,
  ranges: boolean,
): void {
  const match = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
  if (!ranges || !match?.[1]) {
    res.writeHead(200, {
      "content-length": data.length,
      "accept-ranges": ranges ? "bytes" : "none",
    });
    res.end(data);
    return;
  }
  const start = Number(match[1]);
  if (start >= data.length) {
    res.writeHead(416, { "content-range": `bytes */${data.length}` }).end();
    return;
  }
  res.writeHead(206, {
    "content-length": data.length - start,
    "content-range": `bytes ${start}-${data.length - 1}/${data.length}`,
  });
  res.end(data.subarray(start));
}

/**
 * Sends the headers of the whole file and only `sent` bytes of it, then
 * drops the connection: what a network cut mid-download looks like.
 */
export function cutAfter(res: ServerResponse, data: Buffer, sent: number): void {
  res.writeHead(200, { "content-length": data.length });
  res.write(data.subarray(0, sent), () => {
    // Give the client time to take in the bytes before the reset.
    setTimeout(() => res.socket?.destroy(), 50);
  });
}

export async function listen(server: Server, protocol: "http" | "https"): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return `${protocol}://127.0.0.1:${port}`;
}
