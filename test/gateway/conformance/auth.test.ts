import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey } from "../../../gateway/auth/key-format.js";
import { formatPaySignature, signPayload } from "../../../gateway/pay/signature.js";
import { SECRETS, startPlatform, type Platform } from "../support/platform.js";
import {
  GEN,
  INVALID_PAY_SIGNATURE_TEXT,
  errorOf,
  expectErrorEnvelope,
  read,
  until,
  type Json,
} from "./support.js";

/**
 * Spec 5.1 (API-key route) and 5.2 (payment route): who gets in, with which
 * status and body, and which biller sees the request (spec 1's route table:
 * subscription metering on one route, the payment provider on the other).
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

const nowSeconds = () => Math.floor(Date.now() / 1000);

describe("5.1 · API-key route", () => {
  it.each<[string, () => Record<string, string>]>([
    ["missing x-api-key", () => ({})],
    ["empty x-api-key", () => ({ "x-api-key": "" })],
    ["malformed x-api-key", () => ({ "x-api-key": "not-a-key" })],
    [
      "unknown x-api-key (well-formed, never issued)",
      () => ({ "x-api-key": generateApiKey().key }),
    ],
    ["revoked x-api-key", () => ({ "x-api-key": p.keys.revoked.key })],
    ["unknown key as Bearer", () => ({ authorization: `Bearer ${generateApiKey().key}` })],
    ["valid key with another scheme", () => ({ authorization: `Basic ${p.keys.acme.key}` })],
  ])("5.1 · 401 · %s", async (_n, headers) => {
    const answer = await read(p.api(GEN, { key: null, headers: headers() }));
    expectErrorEnvelope(answer, 401, "invalid_api_key");
  });

  it("5.1 · the key in x-api-key is accepted", async () => {
    expect((await read(p.api(GEN))).status).toBe(200);
  });

  it("5.1 · Authorization: Bearer <key> is accepted as an alias of x-api-key", async () => {
    const answer = await read(
      p.api(GEN, { key: null, headers: { authorization: `Bearer ${p.keys.acme.key}` } }),
    );
    expect(answer.status).toBe(200);
  });

  it.each<[string, "acme" | "acmeWeb", string, number]>([
    ["a project of the key's account", "acme", "web", 200],
    ["another project of the key's account", "acme", "batch", 200],
    ["a project-scoped key in its project", "acmeWeb", "web", 200],
    ["a project of another account", "acme", "lab", 403],
    ["an unknown project", "acme", "no-such-project", 403],
    ["a project-scoped key outside its project", "acmeWeb", "batch", 403],
  ])("5.1 · x-project-id · %s → %i", async (_n, key, project, status) => {
    const answer = await read(
      p.api(GEN, { key: p.keys[key].key, headers: { "x-project-id": project } }),
    );
    if (status === 200) expect(answer.status).toBe(200);
    else expectErrorEnvelope(answer, 403, "project_forbidden");
  });

  it("5.1 · OpenAI-Project (the OpenAI clients' header) names the project when x-project-id is absent", async () => {
    const as = (headers: Record<string, string>) =>
      read(p.api(GEN, { key: p.keys.acme.key, headers }));
    expect((await as({ "openai-project": "web" })).status).toBe(200);
    const refused = await as({ "openai-project": "lab" });
    expectErrorEnvelope(refused, 403, "project_forbidden");
    expect(errorOf(refused.body).param).toBe("openai-project");
    // The spec's header wins, as x-api-key wins over Authorization.
    expect((await as({ "x-project-id": "web", "openai-project": "lab" })).status).toBe(200);
    const own = await as({ "x-project-id": "lab", "openai-project": "web" });
    expect(errorOf(own.body).param).toBe("x-project-id");
  });

  it("5.1 · a bad key with a project is 401, not 403 (the key is checked first)", async () => {
    const answer = await read(
      p.api(GEN, { key: p.keys.revoked.key, headers: { "x-project-id": "lab" } }),
    );
    expectErrorEnvelope(answer, 401, "invalid_api_key");
  });

  it("5.1 · the 401 does not say which part of the key was wrong", async () => {
    const bodies = await Promise.all(
      ["not-a-key", generateApiKey().key, p.keys.revoked.key].map(async (key) =>
        errorOf((await read(p.api(GEN, { key }))).body),
      ),
    );
    expect(bodies[1]).toEqual(bodies[0]);
    expect(bodies[2]).toEqual(bodies[0]);
  });
});

describe("5.2 · payment route: the signature", () => {
  it("5.2 · no x-api-key is needed: a valid pay-signature alone is 200", async () => {
    const answer = await read(p.pay(GEN));
    expect(answer.status).toBe(200);
  });

  it("5.2 · 401 · an x-api-key alone is not a credential here: exact body", async () => {
    const answer = await read(
      p.pay(GEN, { signature: null, headers: { "x-api-key": p.keys.acme.key } }),
    );
    expect(answer.status).toBe(401);
    expect(answer.text).toBe(INVALID_PAY_SIGNATURE_TEXT);
  });

  const raw = JSON.stringify(GEN);
  const sign = (secret: string, kid = "k1", t = nowSeconds(), body = raw) =>
    formatPaySignature({ t, kid, v1: [signPayload(Buffer.from(body), secret)] });

  it.each<[string, () => string | null]>([
    ["missing pay-signature", () => null],
    ["empty pay-signature", () => ""],
    ["malformed pay-signature", () => "garbage"],
    ["spaces in the header", () => sign(SECRETS.k1).replaceAll(",", ", ")],
    ["wrong secret", () => sign("not-the-secret-0123456789")],
    ["unknown kid", () => sign(SECRETS.k1, "k9")],
    ["another kid's secret", () => sign(SECRETS.k2new, "k1")],
    ["signature of other bytes", () => sign(SECRETS.k1, "k1", nowSeconds(), `${raw} `)],
    [
      "uppercase hex digest",
      () => sign(SECRETS.k1).replace(/v1=([0-9a-f]+)/, (_m, h: string) => `v1=${h.toUpperCase()}`),
    ],
    [
      "a forged signature with a stale timestamp (401, not 402)",
      () => sign("not-the-secret-0123456789", "k1", nowSeconds() - 3600),
    ],
    ["a valid x-api-key with a bad signature", () => sign("not-the-secret-0123456789")],
  ])('5.2 · 401 · %s: exactly {"error":"invalid_pay_signature"}', async (name, signature) => {
    const headers = name.includes("x-api-key") ? { "x-api-key": p.keys.acme.key } : undefined;
    const answer = await read(
      p.pay(raw, { signature: signature(), ...(headers ? { headers } : {}) }),
    );
    expect(answer.status).toBe(401);
    expect(answer.text).toBe(INVALID_PAY_SIGNATURE_TEXT);
    expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
  });

  it("5.2 · the HMAC is over the raw bytes: a signed body with odd spacing and key order verifies", async () => {
    const odd =
      '{ "temperature":0,  "input" : "Hello", "max_output_tokens":2,"model":"tiny-gpt"}\n';
    const answer = await read(p.pay(odd, { signature: sign(SECRETS.k1, "k1", nowSeconds(), odd) }));
    expect(answer.status).toBe(200);
  });

  it.each<[string, string]>([
    ["the new one", SECRETS.k2new],
    ["the old one", SECRETS.k2old],
  ])("5.2 · the secret is selected by kid: kid k2 with %s verifies", async (name, secret) => {
    // A body of its own: a signature is accepted once, and (t, kid, body) is
    // what makes it one. A timestamp a second apart was not enough: when the
    // clock ticked between the two cases, the second signed the first's t.
    const body = JSON.stringify({ ...GEN, input: `Hello, signed with ${name}` });
    const answer = await read(p.pay(body, { signature: sign(secret, "k2", nowSeconds(), body) }));
    expect(answer.status).toBe(200);
  });

  it.each<[string, number]>([
    ["an hour old", -3600],
    ["an hour ahead", 3600],
  ])("5.2 · 402 · a genuine signature with a stale timestamp (%s)", async (_n, skew) => {
    const answer = await read(
      p.pay(raw, { signature: sign(SECRETS.k1, "k1", nowSeconds() + skew) }),
    );
    expect(answer.status).toBe(402);
    expect(typeof answer.body).toBe("object");
    expect(answer.headers.get("pay-usage")).toBeNull();
  });

  it("5.2 · a bad signature is never failed open, even with the provider down", async () => {
    await p.provider.setMode("down");
    try {
      const answer = await read(p.pay(raw, { signature: sign("not-the-secret-0123456789") }));
      expect(answer.status).toBe(401);
      expect(answer.text).toBe(INVALID_PAY_SIGNATURE_TEXT);
    } finally {
      await p.provider.setMode("allow");
    }
  });
});

describe("5.2 · payment route: the allowance check", () => {
  it("5.2 · 402 · a denied allowance answers the provider's body byte for byte, and nothing runs", async () => {
    await p.provider.setMode("deny", "check");
    let answer;
    let bytes: Buffer;
    try {
      const res = await p.pay(GEN);
      bytes = Buffer.from(await res.arrayBuffer());
      answer = res;
    } finally {
      await p.provider.setMode("allow");
    }
    expect(answer.status).toBe(402);
    expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
    expect(bytes.equals(p.provider.sentDenials.at(-1) ?? Buffer.alloc(0))).toBe(true);
    const id = answer.headers.get("x-request-id") ?? "";
    expect(p.provider.ledger.checks.find((c) => c.requestId === id)?.outcome).toBe("denied");
    // No billable work: nothing is settled for the request.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(p.provider.ledger.settlements.filter((s) => s.requestId === id)).toHaveLength(0);
  });

  it("5.2 · the allowance check runs before any billable work, with the request's model and slug", async () => {
    const answer = await read(p.pay(GEN, { headers: { "pay-agent-id": "agent-order" } }));
    expect(answer.status).toBe(200);
    const id = answer.headers.get("x-request-id") ?? "";
    expect(p.provider.ledger.checks.find((c) => c.requestId === id)).toMatchObject({
      agentId: "agent-order",
      model: "tiny-gpt",
      serviceSlug: "tiny-gpt",
      outcome: "allowed",
    });
  });

  it.each<[string, () => Promise<void>, string | undefined]>([
    ["the provider answers 5xx", () => p.provider.setMode("fail-5xx"), "failed"],
    ["the allowance check hangs", () => p.provider.setMode("hang", "check"), "hung"],
    ["the provider is down", () => p.provider.setMode("down"), undefined],
  ])(
    "5.2 · fail open · %s → 200, and the request is settled exactly once afterwards",
    async (_n, breakProvider, checkOutcome) => {
      await breakProvider();
      let answers: Awaited<ReturnType<typeof read>>[];
      try {
        answers = [await read(p.pay(GEN)), await read(p.pay(GEN))];
      } finally {
        await p.provider.setMode("allow");
      }
      const ids = answers.map((a) => a.headers.get("x-request-id") ?? "");
      for (const answer of answers) {
        expect(answer.status).toBe(200);
        expect(answer.headers.get("pay-usage")).toMatch(/^slug="tiny-gpt"/);
      }
      await until(
        "every fail-open request settled",
        () => ids.every((id) => p.provider.ledger.settlements.some((s) => s.requestId === id)),
        20_000,
      );
      for (const [i, id] of ids.entries()) {
        // The check really was attempted and failed as arranged (a down provider records nothing).
        expect(p.provider.ledger.checks.find((c) => c.requestId === id)?.outcome).toBe(
          checkOutcome,
        );
        const settled = p.provider.ledger.settlements.filter((s) => s.requestId === id);
        expect(settled).toHaveLength(1);
        const usage = answers[i]!.body.usage as Json;
        expect(settled[0]).toMatchObject({
          inputTokens: usage.input_tokens,
          outputTokens: usage.output_tokens,
        });
      }
    },
    30_000,
  );
});

describe("1 · metering per route", () => {
  it("1 · pay route: subscription metering is bypassed (no usage record for pay requests)", async () => {
    const paid = await read(p.pay(GEN));
    expect(paid.status).toBe(200);
    // Usage records and settlements are keyed by the response id the gateway minted.
    const payId = paid.body.id as string;
    // A later API-key request's record arriving shows the sink has caught up.
    const api = await read(p.api(GEN));
    const apiId = api.body.id as string;
    await until("the API-key request's record", () => p.sink.counted.has(apiId));
    await until("the pay request's settlement", () =>
      p.provider.ledger.settlements.some((s) => s.responseId === payId),
    );
    expect(p.sink.counted.has(payId)).toBe(false);
    expect(p.sink.attempts).not.toContain(payId);
  });

  it("1 · API-key route: exactly one usage record per request, keyed by the response id", async () => {
    const answers = [await read(p.api(GEN)), await read(p.api(GEN)), await read(p.api(GEN))];
    const ids = answers.map((a) => a.body.id as string);
    await until("every usage record", () => ids.every((id) => p.sink.counted.has(id)));
    for (const [i, id] of ids.entries()) {
      const usage = answers[i]!.body.usage as Json;
      expect(p.sink.counted.get(id)).toMatchObject({
        response_id: id,
        request_id: answers[i]!.headers.get("x-request-id"),
        account: "acme",
        model: "tiny-gpt",
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
      });
      expect(p.sink.attempts.filter((key) => key === id)).toHaveLength(1);
    }
  });

  it("1 · API-key route: nothing is settled with the payment provider", async () => {
    const answer = await read(p.api(GEN));
    const id = answer.headers.get("x-request-id") ?? "";
    await until("the usage record", () => p.sink.counted.has(answer.body.id as string));
    expect(p.provider.ledger.checks.some((c) => c.requestId === id)).toBe(false);
    expect(p.provider.ledger.settlements.some((s) => s.requestId === id)).toBe(false);
  });
});
