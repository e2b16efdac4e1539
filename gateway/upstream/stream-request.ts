import type { EventEmitter } from "node:events";
import { Agent, request, type ClientRequest, type IncomingHttpHeaders } from "node:http";
import type { Readable } from "node:stream";

/**
 * One streamed request to a runtime, over node:http's keep-alive agent.
 *
 * Whole answers go through undici (forward.ts); a stream does not, because
 * of when undici writes. undici 8 (8.12 here) writes a request on a reused
 * keep-alive socket only from a `setImmediate` (it first reads whatever the
 * idle socket holds: GHSA-35p6-xmwp-9g52), that is, once the event loop has
 * handled everything else its current poll phase brought: other requests'
 * checks, other streams' tokens and endings. A stream's request waited for
 * all of it, 2 to 2.5 ms at the 90th percentile with sixteen clients
 * (docs/streaming-measurements.md, "Sixteen at once"). node:http writes a reused
 * socket's request from a `process.nextTick`, right after the handler that
 * sent it. The runtimes are ours, inside the gateway's trust boundary: what
 * the validation guards against, unsolicited bytes from a server, is a
 * runtime bug, not a caller's attack.
 */
export interface StreamedAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  /** The runtime's body, as it arrives. */
  body: Readable;
}

export interface StreamRequest {
  endpoint: string;
  body: Buffer;
  headers: Record<string, string>;
  signal?: AbortSignal | EventEmitter | undefined;
  /** Longest wait for the answer's headers, and for each later piece of its body. */
  timeoutMs: number;
  connectTimeoutMs: number;
}

/** A failure of the exchange, coded so that forward.ts can tell what it proves. */
export class StreamRequestError extends Error {
  constructor(
    readonly code:
      | "UPSTREAM_CONNECT_TIMEOUT"
      | "UPSTREAM_HEADERS_TIMEOUT"
      | "UPSTREAM_BODY_TIMEOUT"
      | "UPSTREAM_ABORTED",
    message: string,
  ) {
    super(message);
    this.name = code === "UPSTREAM_ABORTED" ? "AbortError" : "StreamRequestError";
  }
}

/** Codes a reused keep-alive socket fails with when its runtime had closed it. */
const STALE_SOCKET = new Set(["ECONNRESET", "EPIPE"]);

export function streamAgent(connectionsPerEndpoint: number): Agent {
  // LIFO keeps the most recently used sockets warm; idle ones close after
  // 30 s, as undici's pool does, or earlier if the runtime asks (Keep-Alive).
  return new Agent({
    keepAlive: true,
    maxSockets: connectionsPerEndpoint,
    scheduling: "lifo",
    timeout: 30_000,
  });
}

function onAbort(signal: AbortSignal | EventEmitter, abort: () => void): () => void {
  if ("aborted" in signal) {
    if (signal.aborted) queueMicrotask(abort);
    signal.addEventListener("abort", abort, { once: true });
    return () => signal.removeEventListener("abort", abort);
  }
  signal.once("abort", abort);
  return () => signal.off("abort", abort);
}

function attempt(agent: Agent, req: StreamRequest, url: URL): Promise<StreamedAnswer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const sent: ClientRequest = request({
      agent,
      host: url.hostname,
      port: url.port,
      path: "/v1/responses",
      method: "POST",
      headers: { ...req.headers, "content-length": String(req.body.length) },
    });
    const fail = (error: StreamRequestError) => sent.destroy(error);
    const headersTimer = setTimeout(
      () => fail(new StreamRequestError("UPSTREAM_HEADERS_TIMEOUT", "no answer in time")),
      req.timeoutMs,
    );
    const release = req.signal
      ? onAbort(req.signal, () => fail(new StreamRequestError("UPSTREAM_ABORTED", "aborted")))
      : () => {};
    sent.once("socket", (socket) => {
      if (!socket.connecting) return;
      const connectTimer = setTimeout(
        () => fail(new StreamRequestError("UPSTREAM_CONNECT_TIMEOUT", "connect timed out")),
        req.connectTimeoutMs,
      );
      socket.once("connect", () => clearTimeout(connectTimer));
      socket.once("close", () => clearTimeout(connectTimer));
    });
    sent.once("response", (response) => {
      answered = true;
      clearTimeout(headersTimer);
      // Each later piece of the body within the model's timeout, as undici's bodyTimeout.
      response.setTimeout(req.timeoutMs, () =>
        response.destroy(new StreamRequestError("UPSTREAM_BODY_TIMEOUT", "body stalled")),
      );
      response.once("close", release);
      // Its reader sees a failure through its own iteration; none crashes the gateway.
      response.on("error", () => {});
      resolve({ statusCode: response.statusCode ?? 0, headers: response.headers, body: response });
    });
    sent.on("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(headersTimer);
      if (answered) return;
      release();
      const stale = sent.reusedSocket && STALE_SOCKET.has(error.code ?? "");
      reject(stale ? Object.assign(error, { staleSocket: true }) : error);
    });
    sent.end(req.body);
  });
}

/** Attempts on sockets found closed, before the error is the caller's. */
const STALE_RETRIES = 2;

/**
 * Sends the request and resolves with the answer once its headers came.
 * A reused socket that the runtime had closed a moment before (its FIN not
 * read yet) fails before the request reached it: Node's documented case,
 * `reusedSocket` and ECONNRESET. Such an attempt is made again; the agent
 * has dropped that socket by then.
 */
export async function sendStreamRequest(agent: Agent, req: StreamRequest): Promise<StreamedAnswer> {
  const url = new URL(req.endpoint);
  for (let retries = 0; ; retries++) {
    try {
      return await attempt(agent, req, url);
    } catch (error) {
      if (!(error as { staleSocket?: boolean }).staleSocket || retries === STALE_RETRIES) {
        throw error;
      }
    }
  }
}
