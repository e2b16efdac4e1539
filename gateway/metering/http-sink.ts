import { request, type Dispatcher } from "undici";
import type { OutboxItem, OutboxSendBatch } from "../outbox/durable-outbox.js";

export interface HttpSinkOptions<T> {
  /** `POST` target; receives a batch of records per request. */
  url: string;
  /** Sent as `Authorization: Bearer <token>` when set. Never logged. */
  token?: string;
  /** How long the sink may take to answer (and stall in its answer); default 10 s. A timeout is retryable. */
  timeoutMs?: number;
  /** A pooled undici dispatcher; default the global one. */
  dispatcher?: Dispatcher;
  /** The record as the sink receives it (snake_case); default: as journaled. */
  toWire?: (record: T) => unknown;
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

/** The body of one delivery: records with the keys the sink dedupes them on. */
export interface SinkBatchBody {
  items: readonly OutboxItem<unknown>[];
}

/**
 * A batch sender for the durable outbox: POSTs `{"items":[{key, record}…]}`
 * as JSON. Each record's key is the same on every attempt, and the sink
 * counts a key once, so a batch sent again (after a timeout, a crash, or
 * split after a refusal) is never billed twice.
 */
export function createHttpSinkSender<T>(options: HttpSinkOptions<T>): OutboxSendBatch<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (options.token) headers.authorization = `Bearer ${options.token}`;

  return async (items, { signal }) => {
    const { toWire } = options;
    const body: SinkBatchBody = {
      items: toWire ? items.map((item) => ({ key: item.key, record: toWire(item.record) })) : items,
    };
    const response = await request(options.url, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
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
