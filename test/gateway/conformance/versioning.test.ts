import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import { GEN, post, read } from "./support.js";

/** Spec section 9: the version is the path prefix, /v1 and /pay/v1. */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

describe("9 · versioning", () => {
  it("9 · POST /v1/responses is the API-key route's version 1", async () => {
    expect((await read(p.api(GEN))).status).toBe(200);
  });

  it("9 · POST /pay/v1/responses is the payment route's version 1", async () => {
    expect((await read(p.pay(GEN))).status).toBe(200);
  });

  it.each([
    "/v2/responses",
    "/v0/responses",
    "/v1.1/responses",
    "/V1/responses",
    "/responses",
    "/v1/response",
    "/pay/v2/responses",
    "/pay/v0/responses",
    "/pay/responses",
    "/pay/V1/responses",
    "/v1/pay/responses",
  ])("9 · 404 · POST %s (another version or no version) is not served", async (path) => {
    const raw = JSON.stringify(GEN);
    const answer = await read(
      post(p.url, path, raw, { "x-api-key": p.keys.acme.key, "pay-signature": p.sign(raw) }),
    );
    expect(answer.status).toBe(404);
    expect(answer.headers.get("x-request-id")).toMatch(/^\S+$/);
    expect(typeof (answer.body.error as { message?: unknown }).message).toBe("string");
  });

  it.each(["GET", "PUT", "DELETE"])(
    "9 · 405 · %s on a versioned path: the path exists, the method does not (Allow: POST)",
    async (method) => {
      const answer = await read(
        fetch(`${p.url}/v1/responses`, {
          method,
          headers: { "x-api-key": p.keys.acme.key },
        }),
      );
      expect(answer.status).toBe(405);
      expect(answer.headers.get("allow")).toBe("POST");
      expect((answer.body.error as { code?: unknown }).code).toBe("method_not_allowed");
    },
  );

  it("9 · the payment-route interface description is versioned 1.0.0", async () => {
    const doc = (await read(fetch(`${p.url}/openapi.json`))).body;
    expect((doc.info as { version?: unknown }).version).toBe("1.0.0");
  });
});
