import { Agent } from "undici";
import type { EventEmitter } from "node:events";
import type { Agent as HttpAgent, IncomingHttpHeaders } from "node:http";
import { GatewayErrors } from "../errors.js";
import type { RoutableModel } from "../registry/registry.js";
import { PREFERRED_LOAD_MARGIN, pickEndpoint, type Preference } from "./pick.js";
import { sendStreamRequest, streamAgent, type StreamedAnswer } from "./stream-request.js";

/**
 * Sends a request body to one of a model's runtimes over pooled keep-alive
 * connections. Picks the endpoint with the fewest requests in flight, or the
 * preferred one (a conversation's previous replica) unless it is gone or
 * overloaded (see pick.ts); when a
 * connection cannot be made, the request never reached a runtime and another
 * endpoint is tried. Once a runtime has the request, a failure is never
 * retried: inference may have run, and a repeat would run it twice.
 */
export interface ForwardRequest {
  model: RoutableModel;
  body: Buffer;
  headers: Record<string, string>;
  /** Cancels the request: an AbortSignal, or an EventEmitter that emits "abort". */
  signal?: AbortSignal | EventEmitter | undefined;
  /**
   * The endpoint that served the conversation's previous turn (a stored
   * response's `served_by`): its prefix cache holds the turn. Taken while it
   * is ready and not overloaded; else the least loaded endpoint is.
   */
  preferredEndpoint?: string | undefined;
}

export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  endpoint: string;
}

const CONNECT_FAILURES = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
  "UPSTREAM_CONNECT_TIMEOUT",
]);

/** True when the error proves the request was not delivered. */
export function isConnectFailure(error: unknown): boolean {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && CONNECT_FAILURES.has(code)) return true;
    // A kept-alive socket the runtime had closed, found so on every attempt.
    if ((e as { staleSocket?: unknown }).staleSocket === true) return true;
    if (e === (e as { cause?: unknown }).cause) break;
  }
  return false;
}

function isAbort(error: unknown): boolean {
  const e = error as { name?: string; code?: string };
  return e.name === "AbortError" || e.code === "UND_ERR_ABORTED";
}

function isTimeout(error: unknown): boolean {
  const e = error as { name?: string; code?: string };
  return (
    e.code === "UND_ERR_HEADERS_TIMEOUT" ||
    e.code === "UND_ERR_BODY_TIMEOUT" ||
    e.code === "UPSTREAM_HEADERS_TIMEOUT" ||
    e.code === "UPSTREAM_BODY_TIMEOUT"
  );
}

/** A failure once a runtime may have the request, as the caller sees it. */
export function phrased(error: unknown, model: RoutableModel): unknown {
  if (isTimeout(error)) return GatewayErrors.requestTimeout(Math.round(model.timeoutMs / 1000));
  // Cancelled by the caller (its client went away): nothing to retry or phrase.
  if (isAbort(error)) return error;
  return Object.assign(GatewayErrors.upstreamError(model.id), { cause: error });
}

export interface UpstreamOptions {
  /** Most connections per runtime endpoint. */
  connectionsPerEndpoint?: number;
  connectTimeoutMs?: number;
  /**
   * Requests in flight a preferred endpoint may carry beyond the least
   * loaded one's before it counts as overloaded (default PREFERRED_LOAD_MARGIN).
   */
  preferredLoadMargin?: number;
}

export class Upstream {
  private readonly agent: Agent;
  /** Streams' connections (stream-request.ts says why they are not undici's). */
  private readonly streamAgent: HttpAgent;
  private readonly connectTimeoutMs: number;
  private readonly inFlight = new Map<string, number>();
  private turn = 0;
  private readonly margin: number;

  constructor(options: UpstreamOptions = {}) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 2_000;
    this.agent = new Agent({
      connections: options.connectionsPerEndpoint ?? 128,
      keepAliveTimeout: 30_000,
      connect: { timeout: this.connectTimeoutMs },
    });
    this.streamAgent = streamAgent(options.connectionsPerEndpoint ?? 128);
    this.margin = options.preferredLoadMargin ?? PREFERRED_LOAD_MARGIN;
  }

  /** Requests in flight per endpoint (for metrics and tests). */
  load(): ReadonlyMap<string, number> {
    return this.inFlight;
  }

  async forward(req: ForwardRequest): Promise<UpstreamResponse> {
    const send = (endpoint: string) =>
      // Origin and path given apart: the module-level request() would parse
      // a URL string on every call. undici's own timers cost far less per
      // request than an AbortSignal.timeout combined with the caller's signal.
      this.agent.request({
        origin: endpoint,
        path: "/v1/responses",
        method: "POST",
        headers: req.headers,
        body: req.body,
        signal: req.signal ?? null,
        headersTimeout: req.model.timeoutMs,
        bodyTimeout: req.model.timeoutMs,
      });
    return this.dispatch(req, send, async (response, endpoint) => {
      try {
        const body = Buffer.from(await response.body.arrayBuffer());
        return { status: response.statusCode, headers: response.headers, body, endpoint };
      } catch (error) {
        throw phrased(error, req.model);
      }
    });
  }

  /**
   * Like `forward`, but hands the answer to `use` unread, as it arrives: a
   * stream is relayed while it lasts. The endpoint counts as busy until
   * `use` settles; what `use` throws passes through as it is.
   */
  stream<T>(
    req: ForwardRequest,
    use: (response: StreamedAnswer, endpoint: string) => Promise<T>,
  ): Promise<T> {
    const send = (endpoint: string) =>
      sendStreamRequest(this.streamAgent, {
        endpoint,
        body: req.body,
        headers: req.headers,
        signal: req.signal,
        timeoutMs: req.model.timeoutMs,
        connectTimeoutMs: this.connectTimeoutMs,
      });
    // A body left unread would hold its socket: it is destroyed, never reused.
    const relay = async (answer: StreamedAnswer, endpoint: string) => {
      try {
        return await use(answer, endpoint);
      } finally {
        if (!answer.body.readableEnded) answer.body.destroy();
      }
    };
    return this.dispatch(req, send, relay);
  }

  /**
   * Asks a runtime to stop a stream it is generating (its client left);
   * the stream then ends with its usage. Best effort: false when it failed.
   */
  async cancel(endpoint: string, responseId: string): Promise<boolean> {
    try {
      const response = await this.agent.request({
        origin: endpoint,
        path: `/v1/responses/${responseId}/cancel`,
        method: "POST",
        headersTimeout: 5_000,
        bodyTimeout: 5_000,
      });
      await response.body.dump();
      return response.statusCode === 200;
    } catch {
      return false;
    }
  }

  private async dispatch<R, T>(
    req: ForwardRequest,
    send: (endpoint: string) => Promise<R>,
    use: (response: R, endpoint: string) => Promise<T>,
  ): Promise<T> {
    const { model } = req;
    if (model.endpoints.length === 0) throw GatewayErrors.modelUnavailable(model.id);
    const tried = new Set<string>();
    const preferred: Preference | undefined = req.preferredEndpoint
      ? { endpoint: req.preferredEndpoint, margin: this.margin }
      : undefined;
    for (;;) {
      const endpoint = pickEndpoint(model.endpoints, this.inFlight, tried, this.turn++, preferred);
      if (!endpoint) throw GatewayErrors.upstreamUnavailable(model.id);
      tried.add(endpoint);
      this.inFlight.set(endpoint, (this.inFlight.get(endpoint) ?? 0) + 1);
      try {
        // The runtime sends its headers once inference is done (a stream's
        // at its first token), so the model's timeout bounds the wait for
        // them, and a stall in the body after.
        const response = await send(endpoint).catch((error: unknown) => {
          if (isConnectFailure(error) && !isAbort(error) && !isTimeout(error)) return null;
          throw phrased(error, model);
        });
        // Never delivered: another endpoint may take it.
        if (response === null) continue;
        return await use(response, endpoint);
      } finally {
        const left = (this.inFlight.get(endpoint) ?? 1) - 1;
        if (left === 0) this.inFlight.delete(endpoint);
        else this.inFlight.set(endpoint, left);
      }
    }
  }

  async close(): Promise<void> {
    this.streamAgent.destroy();
    await this.agent.close();
  }
}
