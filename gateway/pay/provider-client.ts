import { Agent, request, type Dispatcher } from "undici";

/**
 * Our HTTP client for the payment provider: the allowance check before any
 * billable work, and the settlement of actual usage afterwards. The contract
 * (paths, bodies, status handling) is ours and lives in
 * docs/payment-provider.md. This module decides what an answer *means*; the
 * caller decides what to do (fail open, 402, log, count).
 */

export const DEFAULT_CHECK_TIMEOUT_MS = 2_000;
export const DEFAULT_SETTLE_TIMEOUT_MS = 10_000;
/** A denial body is forwarded to the client; anything bigger is not a denial we trust. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface PaymentProviderClientOptions {
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer <credential>`; never logged. */
  readonly credential: string;
  readonly checkTimeoutMs?: number;
  readonly settleTimeoutMs?: number;
  /** A shared pool; when absent the client owns an Agent and closes it in `close()`. */
  readonly dispatcher?: Dispatcher;
}

export interface AllowanceRequest {
  readonly requestId: string;
  readonly agentId: string | null;
  readonly serviceSlug: string;
  readonly model: string;
  /** Upper bound on output tokens the request may generate, if known. */
  readonly maxTokens: number | null;
}

/** A closed set, so it can label a metric without growing its cardinality. */
export type UnavailableReason =
  | "timeout"
  | "connection_error"
  | "server_error"
  | "credential_rejected"
  | "unexpected_status"
  | "bad_answer"
  /** The caller's own signal fired (client gone, shutdown): no verdict was reached. */
  | "aborted";

export interface ProviderDenial {
  readonly kind: "denied";
  readonly status: 402;
  /** The denial as parsed JSON, for logs and decisions. */
  readonly body: unknown;
  /** The exact bytes to send back to the client (always a JSON document). */
  readonly raw: Buffer;
}

export type AllowanceResult =
  | { readonly kind: "allowed" }
  | ProviderDenial
  | {
      readonly kind: "unavailable";
      readonly reason: UnavailableReason;
      readonly detail: string;
      readonly status?: number;
    };

export interface SettlementRequest {
  readonly requestId: string;
  readonly agentId: string | null;
  readonly serviceSlug: string;
  readonly model: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

export interface SettleOptions {
  /** Default: the request id. The outbox passes the key it journaled the record under. */
  readonly idempotencyKey?: string;
  /** Aborts the attempt (e.g. on shutdown); the settlement stays retryable. */
  readonly signal?: AbortSignal;
}

export interface SettleOutcome {
  readonly status: number;
  /** The provider had this idempotency key already (409): nothing new was charged. */
  readonly alreadySettled: boolean;
}

/** A settlement that did not go through; `retryable` says whether sending it again can help. */
export class SettlementError extends Error {
  readonly retryable: boolean;
  readonly status: number | undefined;

  constructor(message: string, retryable: boolean, status?: number, cause?: unknown) {
    super(message, { cause });
    this.name = "SettlementError";
    this.retryable = retryable;
    this.status = status;
  }
}

/** Statuses meaning "the provider read this settlement and will never accept it". */
const PERMANENT_SETTLEMENT_STATUSES = new Set([400, 413, 422]);

/** Used when a 402 carries no JSON: the client still gets a JSON PaymentRequiredError. */
const FALLBACK_DENIAL = { error: "payment_required" } as const;

export class PaymentProviderClient {
  readonly #base: URL;
  readonly #credential: string;
  readonly #checkTimeoutMs: number;
  readonly #settleTimeoutMs: number;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;

  constructor(options: PaymentProviderClientOptions) {
    // A trailing slash makes `new URL("v1/...", base)` keep any path prefix.
    const base = new URL(options.baseUrl);
    if (!base.pathname.endsWith("/")) base.pathname += "/";
    this.#base = base;
    this.#credential = options.credential;
    this.#checkTimeoutMs = options.checkTimeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS;
    this.#settleTimeoutMs = options.settleTimeoutMs ?? DEFAULT_SETTLE_TIMEOUT_MS;
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 30_000 });
  }

  async checkAllowance(
    check: AllowanceRequest,
    options: { readonly signal?: AbortSignal } = {},
  ): Promise<AllowanceResult> {
    const body = {
      request_id: check.requestId,
      agent_id: check.agentId,
      service_slug: check.serviceSlug,
      model: check.model,
      max_tokens: check.maxTokens,
    };
    let answer: ProviderAnswer;
    try {
      answer = await this.#post(
        "v1/allowances/check",
        body,
        {},
        this.#checkTimeoutMs,
        options.signal,
      );
    } catch (error) {
      return unavailableFrom(error);
    }
    return interpretAllowance(answer);
  }

  async settle(settlement: SettlementRequest, options: SettleOptions = {}): Promise<SettleOutcome> {
    const body = {
      request_id: settlement.requestId,
      agent_id: settlement.agentId,
      service_slug: settlement.serviceSlug,
      model: settlement.model,
      input_tokens: settlement.inputTokens,
      output_tokens: settlement.outputTokens,
    };
    let answer: ProviderAnswer;
    try {
      answer = await this.#post(
        "v1/settlements",
        body,
        { "idempotency-key": options.idempotencyKey ?? settlement.requestId },
        this.#settleTimeoutMs,
        options.signal,
      );
    } catch (error) {
      const { reason, detail } = unavailableFrom(error);
      throw new SettlementError(
        `settlement not delivered (${reason}): ${detail}`,
        true,
        undefined,
        error,
      );
    }
    const { status } = answer;
    if (status === 200 || status === 201) return { status, alreadySettled: false };
    if (status === 409) return { status, alreadySettled: true };
    const message = `settlement answered ${status}: ${snippet(answer.raw)}`;
    // Everything but an explicit rejection of the record is worth retrying: a
    // 401/403/404 is our configuration, and the record must outlive its fix.
    throw new SettlementError(message, !PERMANENT_SETTLEMENT_STATUSES.has(status), status);
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  async #post(
    path: string,
    body: unknown,
    extraHeaders: Record<string, string>,
    timeoutMs: number,
    callerSignal: AbortSignal | undefined,
  ): Promise<ProviderAnswer> {
    // One deadline for connect, headers and body alike: a provider that trickles
    // its answer is as unavailable as one that never starts it.
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = callerSignal ? AbortSignal.any([deadline, callerSignal]) : deadline;
    try {
      const response = await request(new URL(path, this.#base), {
        method: "POST",
        dispatcher: this.#dispatcher,
        signal,
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          authorization: `Bearer ${this.#credential}`,
          ...extraHeaders,
        },
        body: JSON.stringify(body),
      });
      const raw = await readCapped(response.body, MAX_ANSWER_BYTES);
      return { status: response.statusCode, raw };
    } catch (error) {
      // Whatever undici wraps an abort in mid-body, the deadline is the cause.
      if (deadline.aborted) {
        throw new ProviderTimeout("no answer within the timeout", { cause: error });
      }
      if (callerSignal?.aborted) throw new CallerAborted("aborted by the caller", { cause: error });
      throw error;
    }
  }
}

export interface ProviderAnswer {
  readonly status: number;
  readonly raw: Buffer;
}

/** Exported for tests: the meaning of an allowance answer, apart from the I/O. */
export function interpretAllowance(answer: ProviderAnswer): AllowanceResult {
  const { status, raw } = answer;
  if (status === 402) {
    const parsed = parseJson(raw);
    // An explicit 402 is a denial even when its body is garbage: failing open
    // on it would serve exactly the callers the provider refused.
    if (isObject(parsed)) return { kind: "denied", status: 402, body: parsed, raw };
    return {
      kind: "denied",
      status: 402,
      body: FALLBACK_DENIAL,
      raw: Buffer.from(JSON.stringify(FALLBACK_DENIAL)),
    };
  }
  if (status === 200) {
    const parsed = parseJson(raw);
    if (isObject(parsed) && parsed.allowed === true) return { kind: "allowed" };
    if (isObject(parsed) && parsed.allowed === false) {
      return { kind: "denied", status: 402, body: parsed, raw };
    }
    return {
      kind: "unavailable",
      reason: "bad_answer",
      detail: "200 without a boolean `allowed`",
      status,
    };
  }
  if (status >= 500) {
    return { kind: "unavailable", reason: "server_error", detail: `answered ${status}`, status };
  }
  if (status === 401 || status === 403) {
    return {
      kind: "unavailable",
      reason: "credential_rejected",
      detail: `answered ${status}`,
      status,
    };
  }
  return { kind: "unavailable", reason: "unexpected_status", detail: `answered ${status}`, status };
}

function unavailableFrom(error: unknown): Extract<AllowanceResult, { kind: "unavailable" }> {
  const name = error instanceof Error ? error.name : "";
  const code = (error as { code?: unknown } | null)?.code;
  if (
    error instanceof ProviderTimeout ||
    name === "TimeoutError" ||
    code === "UND_ERR_HEADERS_TIMEOUT" ||
    code === "UND_ERR_BODY_TIMEOUT"
  ) {
    return { kind: "unavailable", reason: "timeout", detail: "no answer within the timeout" };
  }
  if (error instanceof CallerAborted) {
    return { kind: "unavailable", reason: "aborted", detail: error.message };
  }
  if (error instanceof AnswerTooLarge) {
    return { kind: "unavailable", reason: "bad_answer", detail: error.message };
  }
  const detail =
    typeof code === "string" ? code : error instanceof Error ? error.message : String(error);
  return { kind: "unavailable", reason: "connection_error", detail };
}

class AnswerTooLarge extends Error {}
class ProviderTimeout extends Error {}
class CallerAborted extends Error {}

async function readCapped(body: Dispatcher.ResponseData["body"], limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    size += buffer.length;
    if (size > limit) {
      body.destroy();
      throw new AnswerTooLarge(`answer larger than ${limit} bytes`);
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function snippet(raw: Buffer): string {
  return JSON.stringify(raw.subarray(0, 200).toString("utf8"));
}
