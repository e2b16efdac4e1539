import { defineError, type CodedError } from "../../lib/coded-error.js";
import type { ProviderDenial } from "./allowance-answer.js";
import type { PaySignatureFailureReason, VerifyPaySignatureResult } from "./signature.js";

/**
 * The coded errors of the payment route (`POST /pay/v1/responses`). Two of
 * them carry the exact body the spec fixes (section 2.4), which the error
 * edge sends as is: the 401's `{"error":"invalid_pay_signature"}` and the
 * provider's own denial on a 402.
 */

/** Spec 2.4 PaymentSignatureError, byte for byte once serialised. */
export const INVALID_PAY_SIGNATURE_BODY = Object.freeze({
  error: "invalid_pay_signature",
} as const);

/** Why a signature was refused: the verifier's reasons, and a replay of one already used. */
export type PaySignatureRefusal = PaySignatureFailureReason | "replayed";

export const PayErrors = {
  /**
   * The reason is for our logs only: telling a forger which check failed
   * (unknown kid, bad digest, a replay, not configured) would help them, so
   * every reason gets the same body.
   */
  invalidPaySignature: defineError(
    "invalid_pay_signature",
    401,
    "authentication_error",
    (reason: PaySignatureRefusal) => `pay-signature rejected: ${reason}`,
    () => ({ body: INVALID_PAY_SIGNATURE_BODY }),
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
  /**
   * The provider denied the allowance; the client gets the provider's own
   * bytes, unchanged: they may carry a top-up link or a reason the agent acts
   * on, and the spec leaves their shape to the provider.
   */
  paymentRequired: defineError(
    "payment_required",
    402,
    "permission_error",
    (_denial: ProviderDenial) => "The payment provider denied the allowance.",
    (denial) => ({ body: denial.raw }),
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
