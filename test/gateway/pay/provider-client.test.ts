import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  interpretAllowance,
  PaymentProviderClient,
  SettlementError,
  type AllowanceRequest,
} from "../../../gateway/pay/provider-client.js";
import type { SettlementRecord } from "../../../gateway/pay/settlement.js";
import type { PaymentProvider } from "../../fixtures/payment-provider/server.js";
import { usePaymentProvider } from "./provider-support.js";

const signedBy = {
  digest: "cd".repeat(32),
  kid: "k1",
  timestamp: 1_800_000_000,
  scheme: "v1",
} as const;

const check: AllowanceRequest = {
  responseId: "resp_1",
  requestId: "req_1",
  agentId: "agent-a",
  payRequestId: "payreq-1",
  signedBy,
  serviceSlug: "tiny-gpt",
  model: "tiny-gpt",
  maxTokens: 64,
};

const settlement: SettlementRecord = {
  responseId: "resp_1",
  requestId: "req_1",
  agentId: "agent-a",
  payRequestId: "payreq-1",
  signedBy,
  serviceSlug: "tiny-gpt",
  model: "tiny-gpt",
  inputTokens: 12,
  outputTokens: 34,
  createdAtMs: 1_800_000_000_000,
};

let provider: PaymentProvider;
let client: PaymentProviderClient;
usePaymentProvider(
  { checkTimeoutMs: 300, settleTimeoutMs: 300 },
  (started) => ({ provider, client } = started),
);

afterEach(async () => {
  await provider.setMode("allow");
  provider.ledger.reset();
});

describe("checkAllowance against the stand-in", () => {
  it("is allowed, and the provider saw our documented body", async () => {
    expect(await client.checkAllowance(check)).toEqual({ kind: "allowed" });
    expect(provider.ledger.checks).toEqual([
      {
        responseId: "resp_1",
        requestId: "req_1",
        agentId: "agent-a",
        payRequestId: "payreq-1",
        signatureDigest: "cd".repeat(32),
        serviceSlug: "tiny-gpt",
        model: "tiny-gpt",
        maxTokens: 64,
        outcome: "allowed",
      },
    ]);
  });

  it("sends null for an unknown agent and an unknown maximum", async () => {
    expect(await client.checkAllowance({ ...check, agentId: null, maxTokens: null })).toEqual({
      kind: "allowed",
    });
  });

  it("is denied with the provider's body, byte for byte", async () => {
    await provider.setMode("deny");
    const result = await client.checkAllowance(check);
    expect(result.kind).toBe("denied");
    if (result.kind !== "denied") return;
    expect(result.status).toBe(402);
    expect(result.raw.equals(provider.sentDenials.at(-1)!)).toBe(true);
    expect(result.body).toMatchObject({
      error: "payment_required",
      reason: "insufficient_allowance",
      agent_id: "agent-a",
    });
  });

  it("is denied when the agent's allowance cannot cover the request", async () => {
    provider.ledger.setAllowance("agent-a", 10);
    expect((await client.checkAllowance(check)).kind).toBe("denied");
    expect(await client.checkAllowance({ ...check, maxTokens: 10 })).toEqual({ kind: "allowed" });
  });

  it("is unavailable on a 5xx", async () => {
    await provider.setMode("fail-5xx");
    expect(await client.checkAllowance(check)).toMatchObject({
      kind: "unavailable",
      reason: "server_error",
      status: 503,
    });
  });

  it("is unavailable within the timeout when the provider hangs", async () => {
    await provider.setMode("hang");
    const started = performance.now();
    expect(await client.checkAllowance(check)).toMatchObject({
      kind: "unavailable",
      reason: "timeout",
    });
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(1_500);
    expect(provider.ledger.checks.map((c) => c.outcome)).toEqual(["hung"]);
  });

  it("is unavailable when the provider is down, and allowed again once it is back", async () => {
    // Warm the pool first: a kept-alive socket must not outlive the outage.
    expect(await client.checkAllowance(check)).toEqual({ kind: "allowed" });
    await provider.setMode("down");
    expect(await client.checkAllowance(check)).toMatchObject({
      kind: "unavailable",
      reason: "connection_error",
    });
    await provider.setMode("allow");
    expect(await client.checkAllowance(check)).toEqual({ kind: "allowed" });
  });

  it("is unavailable (credential_rejected) when the provider refuses our credential", async () => {
    const wrong = new PaymentProviderClient({ baseUrl: provider.url, credential: "not-it" });
    try {
      expect(await wrong.checkAllowance(check)).toMatchObject({
        kind: "unavailable",
        reason: "credential_rejected",
        status: 401,
      });
    } finally {
      await wrong.close();
    }
  });

  it("keeps a path prefix of the base URL", async () => {
    const prefixed = new PaymentProviderClient({
      baseUrl: `${provider.url}/nested`,
      credential: provider.credential,
    });
    try {
      // The stand-in serves no prefix, so a kept prefix shows up as a 404.
      expect(await prefixed.checkAllowance(check)).toMatchObject({
        reason: "unexpected_status",
        status: 404,
      });
    } finally {
      await prefixed.close();
    }
  });
});

describe("settle against the stand-in", () => {
  it("books a settlement once however often it is sent", async () => {
    expect(await client.settle(settlement)).toEqual({ status: 201, alreadySettled: false });
    expect(await client.settle(settlement)).toEqual({ status: 200, alreadySettled: false });
    expect(provider.ledger.settlements).toHaveLength(1);
    expect(provider.ledger.settlements[0]).toMatchObject({
      idempotencyKey: "resp_1",
      responseId: "resp_1",
      signatureDigest: "cd".repeat(32),
      payRequestId: "payreq-1",
      inputTokens: 12,
      outputTokens: 34,
    });
    expect(provider.ledger.balance("agent-a").spentTokens).toBe(46);
    expect(provider.ledger.duplicateSettlements).toBe(1);
  });

  it("treats 409 (the key was used already) as settled", async () => {
    await client.settle(settlement);
    expect(await client.settle({ ...settlement, outputTokens: 99 })).toEqual({
      status: 409,
      alreadySettled: true,
    });
    expect(provider.ledger.balance("agent-a").spentTokens).toBe(46);
  });

  it("uses the given idempotency key", async () => {
    await client.settle(settlement, { idempotencyKey: "outbox-key-7" });
    expect(provider.ledger.settlements[0]?.idempotencyKey).toBe("outbox-key-7");
  });

  it.each([
    ["fail-5xx", 503],
    ["hang", undefined],
    ["down", undefined],
  ] as const)("throws a retryable error when the provider is %s", async (mode, status) => {
    await provider.setMode(mode);
    const error = await client.settle(settlement).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SettlementError);
    expect(error).toMatchObject({ retryable: true, status });
  });

  it("throws a non-retryable error when the provider rejects the record", async () => {
    await provider.setMode("deny", "settle");
    const error = await client.settle(settlement).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "SettlementError", retryable: false, status: 422 });
    // The check endpoint is unaffected by a per-endpoint mode.
    expect(await client.checkAllowance(check)).toEqual({ kind: "allowed" });
  });

  it("keeps retrying while the provider refuses our credential", async () => {
    const wrong = new PaymentProviderClient({ baseUrl: provider.url, credential: "not-it" });
    try {
      const error = await wrong.settle(settlement).catch((e: unknown) => e);
      expect(error).toMatchObject({ retryable: true, status: 401 });
      expect(provider.ledger.settlements).toHaveLength(0);
    } finally {
      await wrong.close();
    }
  });
});

describe("a caller's signal", () => {
  it("ends a check with `aborted`, and a settlement with a retryable error", async () => {
    await provider.setMode("hang");
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    expect(await client.checkAllowance(check, { signal: controller.signal })).toMatchObject({
      kind: "unavailable",
      reason: "aborted",
    });
    const error = await client
      .settle(settlement, { signal: AbortSignal.abort() })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "SettlementError", retryable: true });
  });
});

describe("answers the stand-in does not give", () => {
  let odd: Server;
  let oddUrl: string;
  let reply: { status: number; body: string; stall?: boolean } = { status: 200, body: "" };

  beforeAll(async () => {
    odd = createServer((req, res) => {
      req.resume();
      res.writeHead(reply.status, { "content-type": "application/json" });
      // A stall sends the headers and part of the body, then nothing more.
      if (reply.stall) res.write(reply.body);
      else res.end(reply.body);
    });
    await new Promise<void>((resolve) => odd.listen(0, "127.0.0.1", resolve));
    oddUrl = `http://127.0.0.1:${(odd.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    odd.closeAllConnections();
    await new Promise((resolve) => odd.close(resolve));
  });

  async function answer(status: number, body: string, stall = false) {
    reply = { status, body, stall };
    const c = new PaymentProviderClient({ baseUrl: oddUrl, credential: "x", checkTimeoutMs: 300 });
    try {
      return await c.checkAllowance(check);
    } finally {
      await c.close();
    }
  }

  it("reads a 200 with allowed: false as a denial, passed through", async () => {
    const body = '{"allowed":false,"reason":"agent_blocked"}';
    const result = await answer(200, body);
    expect(result).toMatchObject({ kind: "denied", status: 402 });
    expect(result.kind === "denied" && result.raw.toString()).toBe(body);
  });

  it("denies on a 402 without a JSON object, with a JSON body of our own", async () => {
    const result = await answer(402, "Payment Required");
    expect(result.kind === "denied" && result.raw.toString()).toBe('{"error":"payment_required"}');
  });

  it("denies on a 402 too large to read, as on any other 402", async () => {
    const result = await answer(402, JSON.stringify({ error: "no", pad: "x".repeat(70_000) }));
    expect(result.kind === "denied" && result.raw.toString()).toBe('{"error":"payment_required"}');
  });

  it.each([
    ["a 200 without JSON", 200, "ok"],
    ["a 200 without `allowed`", 200, '{"status":"fine"}'],
    ["a 200 with a string `allowed`", 200, '{"allowed":"true"}'],
    ["an oversized answer", 200, JSON.stringify({ allowed: true, pad: "x".repeat(70_000) })],
  ])("is unavailable (bad_answer) on %s", async (_name, status, body) => {
    expect(await answer(status, body)).toMatchObject({ kind: "unavailable", reason: "bad_answer" });
  });

  it("is unavailable (timeout) when the body stalls after the headers", async () => {
    expect(await answer(200, '{"allowed":', true)).toMatchObject({
      kind: "unavailable",
      reason: "timeout",
    });
  });

  it("is unavailable (unexpected_status) on another 4xx or a redirect", async () => {
    expect(await answer(429, "{}")).toMatchObject({ reason: "unexpected_status", status: 429 });
    expect(await answer(302, "")).toMatchObject({ reason: "unexpected_status", status: 302 });
  });
});

describe("interpretAllowance", () => {
  it("is pure over status and bytes", () => {
    expect(interpretAllowance({ status: 200, raw: Buffer.from('{"allowed":true}') })).toEqual({
      kind: "allowed",
    });
    expect(interpretAllowance({ status: 403, raw: Buffer.alloc(0) })).toMatchObject({
      reason: "credential_rejected",
    });
    expect(interpretAllowance({ status: 500, raw: Buffer.alloc(0) })).toMatchObject({
      reason: "server_error",
    });
  });
});
