import { createHash } from "node:crypto";
import type {
  FastifyReply,
  FastifyRequest,
  preHandlerAsyncHookHandler,
  preValidationAsyncHookHandler,
} from "fastify";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import { mostTokens, type BillableBody } from "../metering/most-tokens.js";
import type { GatewayMetrics } from "../metrics.js";
import { PayErrors, signatureError } from "../pay/pay-errors.js";
import type { AllowanceRequest, AllowanceResult } from "../pay/provider-client.js";
import { signatureIdentity, verifyPaySignature } from "../pay/signature.js";
import type { UsedSignatures } from "../pay/used-signatures.js";
import type { RoutableModel } from "../registry/registry.js";
import type { PayCaller } from "../routes/caller.js";
import { routeConfigOf } from "../routes/route-config.js";
import { responseIdOf } from "./request-id.js";

/**
 * The payment route's gate (spec 5.2), in the order the spec sets:
 *
 * - `preValidation`: `pay-signature` over the raw bytes, before the body is
 *   judged (a forged request is a 401 even when its body is bad); a genuine
 *   but stale one is a 402; then the signature is claimed in the memory of
 *   used signatures, and a replay is a 401 like a forgery (see
 *   docs/payment-provider.md for why 401). Never failed open.
 * - `preHandler`, after the body is admitted and the signing kid's rate
 *   limit: the allowance check with the provider, 402 on a denial, failed
 *   open (logged, counted) only when the provider cannot answer.
 * - `onSend`: a request refused before anything was served, with a status
 *   the spec tells a client to retry, gives its signature back, so that the
 *   retry is answered rather than refused as a replay.
 */
declare module "fastify" {
  interface FastifyRequest {
    /** The identity this request claimed in the memory of used signatures. */
    claimedSignature?: string;
  }
}

export interface PaymentGateParts {
  /** kid -> its secrets; empty when the route is not configured (every request is a 401). */
  secrets: ReadonlyMap<string, readonly string[]>;
  toleranceSeconds: number;
  usedSignatures: UsedSignatures;
  checkAllowance(request: AllowanceRequest): Promise<AllowanceResult>;
  metrics: GatewayMetrics;
  now: () => number;
  /** The most bytes forwarded to a runtime (the body limit), which bounds a continuation. */
  bodyLimit: number;
}

/** Header values that go into logs: single, printable, bounded. */
function loggable(value: string | string[] | undefined): string | null {
  return typeof value === "string" && /^[\x21-\x7e]{1,128}$/.test(value) ? value : null;
}

function hashOf(value: string): string {
  return createHash("sha256").update(value).digest("hex").slice(0, 16);
}

/**
 * What a request without a body (a stored response's GET or DELETE) is
 * signed over: its method and target, `GET /pay/v1/responses/resp_…?limit=5`,
 * so a signature for one response or page opens no other.
 */
export function signedTarget(request: FastifyRequest): Buffer {
  return Buffer.from(`${request.method} ${request.url}`, "utf8");
}

/** `preValidation`, on the payment routes: the signature, then the replay memory. */
export function verifyPayment(parts: PaymentGateParts): preValidationAsyncHookHandler {
  return async (request) => {
    const nowMs = parts.now();
    const nowSeconds = Math.floor(nowMs / 1000);
    const runsModel = routeConfigOf(request).modelRoute !== null;
    const rawBody = runsModel ? (request.rawBody ?? Buffer.alloc(0)) : signedTarget(request);
    const result = verifyPaySignature({
      header: request.headers["pay-signature"],
      rawBody,
      secrets: parts.secrets,
      nowSeconds,
      toleranceSeconds: parts.toleranceSeconds,
    });
    if (!result.ok) throw signatureError(result, nowSeconds, parts.toleranceSeconds);

    const agentHeader = request.headers["pay-agent-id"];
    const agentId = loggable(agentHeader);
    // An agent id unfit for logs is still told apart in them: by its hash.
    const agentKey =
      agentId ??
      (agentHeader === undefined ? "anonymous" : `sha256:${hashOf(String(agentHeader))}`);
    const payRequestId = loggable(request.headers["pay-request-id"]);
    request.logFields = {
      payAgentId: agentKey,
      kid: result.kid,
      ...(payRequestId ? { payRequestId } : {}),
    };

    // Accepted once: claimed only now that it verified, so a forgery cannot
    // use up a genuine signature's place; remembered until the timestamp
    // check would refuse it anyway.
    // A read or delete of a stored response runs and bills nothing: a replay
    // within the tolerance repeats it harmlessly, so it is not claimed.
    const identity = signatureIdentity(result.timestamp, result.kid, rawBody);
    const expiresAtMs = (result.timestamp + parts.toleranceSeconds + 1) * 1000;
    if (runsModel) {
      if (!(await parts.usedSignatures.claim(identity, expiresAtMs))) {
        parts.metrics.payReplays.inc();
        throw PayErrors.invalidPaySignature("replayed");
      }
      request.claimedSignature = identity;
    }
    request.caller = {
      kind: "pay",
      agentId,
      payRequestId,
      signedBy: {
        digest: result.digest,
        kid: result.kid,
        timestamp: result.timestamp,
        scheme: result.scheme,
      },
    };
  };
}

/**
 * Who a paid request is, as both the allowance check and the settlement
 * tell the provider: the gateway's ids, what the provider signed, the model.
 */
export function paidRequestOf(request: FastifyRequest, caller: PayCaller, model: RoutableModel) {
  return {
    responseId: responseIdOf(request),
    requestId: request.id,
    agentId: caller.agentId,
    payRequestId: caller.payRequestId,
    signedBy: caller.signedBy,
    serviceSlug: model.serviceSlug,
    model: model.id,
  };
}

/** `preHandler`, on the payment routes, after admission and the agent's rate limit: the allowance check. */
export function checkAllowance(parts: PaymentGateParts): preHandlerAsyncHookHandler {
  return async (request) => {
    const caller = request.caller;
    const model = request.model;
    if (caller?.kind !== "pay" || !model) return;
    const allowance = await parts.checkAllowance({
      ...paidRequestOf(request, caller, model),
      maxTokens: mostTokens(request.body as BillableBody, model, parts.bodyLimit),
    });
    if (allowance.kind === "denied") throw PayErrors.paymentRequired(allowance);
    if (allowance.kind === "unavailable") {
      parts.metrics.allowanceFailOpen.inc({ reason: allowance.reason });
      const fields = { ...logFieldsOf(request), reason: allowance.reason };
      const message = "payment provider unavailable: allowance check failed open";
      // Our credential refused is ours to fix, not the provider's to recover
      // from: an error, for an alert (docs/payment-provider.md).
      if (allowance.reason === "credential_rejected") request.log.error(fields, message);
      else request.log.warn(fields, message);
    }
  };
}

/**
 * Spec section 7: back off and retry a 429, retry a 408, a 409 and a 5xx.
 * The other refusals (400, 402, 420) are not retried unchanged.
 */
function retryable(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/**
 * `onSend`, on the payment model routes: gives back the signature of a
 * request refused with a status the spec says to retry, when nothing was
 * served (so nothing is or will be settled), before that answer leaves, so
 * that the retry finds it free. A 429 of the signer's rate limit, a 408 of a
 * runtime that did not answer, a 502 or 503 with no runtime to serve it. A
 * stream has sent its 200 before it can fail, so its signature stays used. A
 * release that fails leaves the claim until it expires: the retry is then
 * refused as a replay, the strict side.
 */
export function releaseRefused(
  parts: PaymentGateParts,
): (request: FastifyRequest, reply: FastifyReply) => Promise<void> | null {
  return (request, reply) => {
    const claimed = request.claimedSignature;
    if (claimed === undefined || reply.served || !retryable(reply.statusCode)) return null;
    request.claimedSignature = undefined;
    return parts.usedSignatures.release(claimed).catch((error: unknown) => {
      request.log.warn({ ...logFieldsOf(request), err: error }, "signature not released");
    });
  };
}
