import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import { GEN, INVALID_PAY_SIGNATURE_TEXT, read } from "./support.js";

/**
 * Spec 5.2 item 4: with the payment provider not configured for the
 * environment, the payment route is a 401 with the exact PaymentSignatureError
 * body, whatever the request carries; never failed open. Its own platform,
 * since the gateway is built without payments.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform({ withoutPayments: true });
});
afterAll(async () => p?.close());

describe("5.2 · payment provider unconfigured", () => {
  it.each<[string, () => Promise<Response>]>([
    ["a correctly signed request", () => p.pay(GEN)],
    ["an unsigned request", () => p.pay(GEN, { signature: null })],
    [
      "a request with a valid x-api-key",
      () => p.pay(GEN, { signature: null, headers: { "x-api-key": p.keys.acme.key } }),
    ],
  ])('5.2 · 401 · %s: exactly {"error":"invalid_pay_signature"}', async (_n, send) => {
    const answer = await read(send());
    expect(answer.status).toBe(401);
    expect(answer.text).toBe(INVALID_PAY_SIGNATURE_TEXT);
    expect(answer.headers.get("pay-usage")).toBeNull();
    expect(p.provider.ledger.checks).toHaveLength(0);
  });

  it("5.2 · the API-key route is unaffected", async () => {
    expect((await read(p.api(GEN))).status).toBe(200);
  });
});
