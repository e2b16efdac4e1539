import { describe, expect, it } from "vitest";
import { CodedError } from "../../../lib/coded-error.js";
import {
  INVALID_PAY_SIGNATURE_BODY,
  PAY_ERROR_CODES,
  PayErrors,
  payErrorReply,
  signatureError,
} from "../../../gateway/pay/pay-errors.js";
import type { PaySignatureFailureReason } from "../../../gateway/pay/signature.js";

describe("pay errors", () => {
  it("pins the codes of the payment route", () => {
    expect([...PAY_ERROR_CODES].sort()).toEqual([
      "invalid_pay_signature",
      "pay_signature_expired",
      "payment_required",
    ]);
  });

  it("answers every signature failure with exactly the spec's 401 body", () => {
    expect(JSON.stringify(INVALID_PAY_SIGNATURE_BODY)).toBe('{"error":"invalid_pay_signature"}');
    const reasons: PaySignatureFailureReason[] = [
      "missing",
      "malformed",
      "unknown_kid",
      "mismatch",
      "not_configured",
    ];
    for (const reason of reasons) {
      const error = signatureError({ ok: false, reason }, 1000, 300);
      expect(error.code).toBe("invalid_pay_signature");
      const reply = payErrorReply(error);
      expect(reply?.statusCode).toBe(401);
      // The reason stays in our logs; the client cannot tell them apart.
      expect(reply?.body.toString()).toBe('{"error":"invalid_pay_signature"}');
    }
  });

  it("answers a stale timestamp with 402 and a Responses-style error envelope", () => {
    const error = signatureError({ ok: false, reason: "stale", timestamp: 599 }, 1000, 300);
    const reply = payErrorReply(error);
    expect(reply?.statusCode).toBe(402);
    expect(JSON.parse(reply!.body.toString())).toEqual({
      error: {
        message:
          "The pay-signature timestamp is 401 s away from the server's clock; " +
          "at most 300 s is accepted. Sign the request again.",
        type: "authentication_error",
        param: "pay-signature",
        code: "pay_signature_expired",
      },
    });
  });

  it("passes the provider's denial through byte for byte", () => {
    const raw = Buffer.from('{ "error" : "payment_required",\n"topup_url": "x" }\n');
    const error = PayErrors.paymentRequired({ kind: "denied", status: 402, body: {}, raw });
    const reply = payErrorReply(error);
    expect(reply?.statusCode).toBe(402);
    expect(reply?.contentType).toBe("application/json; charset=utf-8");
    expect(reply?.body.equals(raw)).toBe(true);
  });

  it("leaves other errors to the shared handler", () => {
    expect(payErrorReply(new Error("x"))).toBeNull();
    expect(payErrorReply(new CodedError("other", 400, "invalid_request_error", "x"))).toBeNull();
  });
});
