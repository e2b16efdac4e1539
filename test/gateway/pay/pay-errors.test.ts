import { describe, expect, it } from "vitest";
import {
  INVALID_PAY_SIGNATURE_BODY,
  PAY_ERROR_CODES,
  PayErrors,
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

  it("answers every signature refusal, a replay included, with exactly the spec's 401 body", () => {
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
      expect(error.statusCode).toBe(401);
      // The reason stays in our logs; the client cannot tell them apart.
      expect(JSON.stringify(error.body)).toBe('{"error":"invalid_pay_signature"}');
    }
    const replay = PayErrors.invalidPaySignature("replayed");
    expect(replay.statusCode).toBe(401);
    expect(JSON.stringify(replay.body)).toBe('{"error":"invalid_pay_signature"}');
  });

  it("answers a stale timestamp with 402 and says by how much", () => {
    const error = signatureError({ ok: false, reason: "stale", timestamp: 599 }, 1000, 300);
    expect(error.statusCode).toBe(402);
    expect(error.body).toBeUndefined();
    expect(error.param).toBe("pay-signature");
    expect(error.message).toBe(
      "The pay-signature timestamp is 401 s away from the server's clock; " +
        "at most 300 s is accepted. Sign the request again.",
    );
  });

  it("carries the provider's denial byte for byte", () => {
    const raw = Buffer.from('{ "error" : "payment_required",\n"topup_url": "x" }\n');
    const error = PayErrors.paymentRequired({ kind: "denied", status: 402, body: {}, raw });
    expect(error.statusCode).toBe(402);
    expect(error.body).toBe(raw);
  });
});
