import { request, type Dispatcher } from "undici";
import type { OutboxSend } from "../outbox/durable-outbox.js";

export interface HttpSinkOptions {
  /** `POST` target; receives one JSON record per request. */
  url: string;
  /** Sent as `Authorization: Bearer <token>` when set. Never logged. */
  token?: string;
  /** Whole-request timeout; default 10 s. A timeout is retryable. */
  timeoutMs?: number;
  /** A pooled undici dispatcher; default the global one. */
  dispatcher?: Dispatcher;
}

/** A delivery the sink refused; `retryable` tells the outbox whether to try again. */
export class SinkError extends Error {
  readonly status: number | undefined;
  readonly retryable: boolean;
  constructor(message: string, options: { status?: number; retryable: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.name = "SinkError";
    this.status = options.status;
    this.retryable = options.retryable;
  }
}

export type SinkOutcome = "delivered" | "retry" | "reject";

/**
 * What a sink's status means, pure. 2xx is delivered; 409 is delivered too (the
 * sink already has this idempotency key, which is the point of the key); 408,
 * 425 and 429 are "later", like 5xx; any other 4xx says the record itself is
 * wrong and retrying cannot help.
 */
export function classifySinkStatus(status: number): SinkOutcome {
  if ((status >= 200 && status < 300) || status === 409) return "delivered";
  if (status >= 500 || status === 408 || status === 425 || status === 429) return "retry";
  return "reject";
}

/** For the outbox: connection errors and timeouts are retryable; a SinkError says. */
export function isRetryableSinkError(error: unknown): boolean {
  return error instanceof SinkError ? error.retryable : true;
}

/**
 * A sender for the durable outbox that POSTs each record as JSON with its
 * `Idempotency-Key`. Every attempt of one record carries the same key, so the
 * sink can count it once.
 */
export function createHttpSinkSender<T>(options: HttpSinkOptions): OutboxSend<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (options.token) headers.authorization = `Bearer ${options.token}`;

  return async (record, idempotencyKey, { signal }) => {
    const response = await request(options.url, {
      method: "POST",
      headers: { ...headers, "idempotency-key": idempotencyKey },
      body: JSON.stringify(record),
      signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
    // Read a little of the body for the error message, and always drain it so
    // the pooled connection can be reused.
    const text = await response.body.text().catch(() => "");
    const outcome = classifySinkStatus(response.statusCode);
    if (outcome === "delivered") return;
    throw new SinkError(`sink answered ${response.statusCode}: ${text.slice(0, 200)}`, {
      status: response.statusCode,
      retryable: outcome === "retry",
    });
  };
}
