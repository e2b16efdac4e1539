import { defineError, isCodedError, type CodedError } from "../../lib/coded-error.js";
import type { ProviderDenial } from "./allowance-answer.js";
import type { PaySignatureFailureReason, VerifyPaySignatureResult } from "./signature.js";

/**
 * The coded errors of the payment route (`POST /pay/v1/responses`). Their
 * bodies are not the failed Responses envelope the shared error handler
 * writes: the spec fixes them (section 2.4), so `payErrorReply` renders them
 * and the route's handler sends its answer verbatim.
 */

/** Spec 2.4 PaymentSignatureError, byte for byte once serialised. */
export const INVALID_PAY_SIGNATURE_BODY = Object.freeze({
  error: "invalid_pay_signature",
} as const);

export const PayErrors = {
  /**
   * The reason is for our logs only: telling a forger which check failed
   * (unknown kid, bad digest, not configured) would help them, so every
   * reason gets the same body.
   */
  invalidPaySignature: defineError(
    "invalid_pay_signature",
    401,
    "authentication_error",
    (reason: PaySignatureFailureReason) => `pay-signature rejected: ${reason}`,
  ),
  /** A genuine signature with a timestamp outside the tolerance: a denial, so 402 (spec 5.2). */
  paySignatureExpired: defineError(
    "pay_signature_expired",
    402,
    "authentication_error",
    (skewSeconds: number, toleranceSeconds: number) =>
      `The pay-signature timestamp is ${skewSeconds} s away from the server's clock; ` +
      `at most ${toleranceSeconds} s is accepted. Sign the request again.`,
    () => ({ param: "pay-signature" }),
  ),
  /** The provider denied the allowance; the client gets the provider's own body. */
  paymentRequired: defineError(
    "payment_required",
    402,
    "permission_error",
    (_denial: ProviderDenial) => "The payment provider denied the allowance.",
    (denial) => ({ cause: denial }),
  ),
} as const;

export const PAY_ERROR_CODES: readonly string[] = Object.values(PayErrors).map((e) => e.code);

/** The 401 or 402 a failed `verifyPaySignature` result answers with. */
export function signatureError(
  result: Extract<VerifyPaySignatureResult, { ok: false }>,
  nowSeconds: number,
  toleranceSeconds: number,
): CodedError {
  if (result.reason === "stale") {
    return PayErrors.paySignatureExpired(Math.abs(nowSeconds - result.timestamp), toleranceSeconds);
  }
  return PayErrors.invalidPaySignature(result.reason);
}

export interface PayErrorReply {
  readonly statusCode: 401 | 402;
  readonly contentType: "application/json; charset=utf-8";
  /** The exact bytes to send. */
  readonly body: Buffer;
}

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * Renders an error of this route, or returns null for any other error (which
 * the shared handler then answers as usual).
 */
export function payErrorReply(error: unknown): PayErrorReply | null {
  if (!isCodedError(error)) return null;
  switch (error.code) {
    case PayErrors.invalidPaySignature.code:
      return {
        statusCode: 401,
        contentType: JSON_TYPE,
        body: Buffer.from(JSON.stringify(INVALID_PAY_SIGNATURE_BODY)),
      };
    case PayErrors.paySignatureExpired.code:
      // The ErrorEnvelope of spec 2.4: the denial is ours, not the provider's.
      return {
        statusCode: 402,
        contentType: JSON_TYPE,
        body: Buffer.from(
          JSON.stringify({
            error: {
              message: error.message,
              type: error.type,
              param: error.param,
              code: error.code,
            },
          }),
        ),
      };
    case PayErrors.paymentRequired.code: {
      const denial = error.cause as ProviderDenial | undefined;
      // Passed through unchanged: the provider's body may carry a top-up link
      // or reason the agent acts on, and the spec leaves its shape to them.
      const body = denial?.raw ?? Buffer.from(JSON.stringify({ error: "payment_required" }));
      return { statusCode: 402, contentType: JSON_TYPE, body };
    }
    default:
      return null;
  }
}
