import { Agent, request, type Dispatcher } from "undici";
import type { SettlementRecord, SignedBy } from "./settlement.js";
import {
  interpretAllowance,
  type AllowanceResult,
  type ProviderAnswer,
} from "./allowance-answer.js";

export {
  interpretAllowance,
  type AllowanceResult,
  type ProviderAnswer,
  type ProviderDenial,
  type UnavailableReason,
} from "./allowance-answer.js";

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

/** One allowance check, as the route knows it; `checkAllowance` writes the wire's snake_case. */
export interface AllowanceRequest {
  /** The response id the gateway minted: the settlement that may follow carries it too. */
  readonly responseId: string;
  /** The caller's `x-request-id`: correlation only. */
  readonly requestId: string;
  readonly agentId: string | null;
  readonly payRequestId: string | null;
  /** What the provider signed: the provider attributes the request by it. */
  readonly signedBy: SignedBy;
  readonly serviceSlug: string;
  readonly model: string;
  /** Upper bound on the tokens the request may use, if known. */
  readonly maxTokens: number | null;
}

export interface SettleOptions {
  /** Default: the response id. The outbox passes the key it journaled the record under. */
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
      response_id: check.responseId,
      request_id: check.requestId,
      agent_id: check.agentId,
      pay_request_id: check.payRequestId,
      ...signedByWire(check.signedBy),
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

  async settle(settlement: SettlementRecord, options: SettleOptions = {}): Promise<SettleOutcome> {
    const body = {
      response_id: settlement.responseId,
      request_id: settlement.requestId,
      agent_id: settlement.agentId,
      pay_request_id: settlement.payRequestId,
      ...signedByWire(settlement.signedBy),
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
        { "idempotency-key": options.idempotencyKey ?? settlement.responseId },
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
      // An answer too large to read still has its status: a 402 is a denial
      // whatever its body (allowance-answer.ts), a 200 settlement settled.
      if (raw === null)
        return { status: response.statusCode, raw: Buffer.alloc(0), oversized: true };
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

/** What the provider signed, as the wire names it (docs/payment-provider.md). */
function signedByWire(signedBy: SignedBy | null) {
  return {
    signature_digest: signedBy?.digest ?? null,
    signature_kid: signedBy?.kid ?? null,
    signature_t: signedBy?.timestamp ?? null,
    signature_scheme: signedBy?.scheme ?? null,
  };
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
  const detail =
    typeof code === "string" ? code : error instanceof Error ? error.message : String(error);
  return { kind: "unavailable", reason: "connection_error", detail };
}

class ProviderTimeout extends Error {}
class CallerAborted extends Error {}

/** The answer's bytes, or null when they run past `limit` (the rest is not read). */
async function readCapped(
  body: Dispatcher.ResponseData["body"],
  limit: number,
): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    size += buffer.length;
    if (size > limit) {
      body.destroy();
      return null;
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

function snippet(raw: Buffer): string {
  return JSON.stringify(raw.subarray(0, 200).toString("utf8"));
}
