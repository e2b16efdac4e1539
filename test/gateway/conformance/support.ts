import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { Registry } from "prom-client";
import { expect } from "vitest";
import { buildGateway } from "../../../gateway/app.js";
import { Meter } from "../../../gateway/metering/meter.js";
import type { UsageRecord } from "../../../gateway/metering/usage-record.js";
import { DurableOutbox } from "../../../gateway/outbox/durable-outbox.js";
import { PaymentProviderClient } from "../../../gateway/pay/provider-client.js";
import type { SettlementRecord } from "../../../gateway/pay/settlement.js";
import { InProcessUsedSignatures } from "../../../gateway/pay/used-signatures.js";
import { SECRETS, type Platform } from "../support/platform.js";

/**
 * Helpers of the conformance suite (docs: /work/shared/spec/responses-service.md).
 * Every test file starts its own platform; these only shape requests and
 * read answers, so each assertion stays in the test that names its spec row.
 */

export type Json = Record<string, unknown>;

/** A cheap, deterministic text-generation request. */
export const GEN = { model: "tiny-gpt", input: "Hello", max_output_tokens: 2, temperature: 0 };

/** A classification request whose labels the tiny NLI model gets right. */
export const NLI = {
  model: "tiny-nli",
  input: "The team scored a goal in the final minute of the match",
  categories: ["sports", "politics", "cooking", "technology"],
};

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: Json;
}

/** Reads a response once: status, headers, raw text and the parsed JSON object. */
export async function read(response: Response | Promise<Response>): Promise<Answer> {
  const res = await response;
  const text = await res.text();
  let body: Json = {};
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed === "object" && parsed !== null) body = parsed as Json;
  } catch {
    body = {};
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** The `error` object of a body, for assertions. */
export function errorOf(body: Json): Json {
  const error = body.error;
  expect(typeof error === "object" && error !== null, "body has an error object").toBe(true);
  return error as Json;
}

/**
 * Spec 7 (400 and 420 rows): the failed Responses envelope, `status: "failed"`
 * and a populated `error` with `message` and `code`, and `type` and `param`.
 */
export function expectFailedEnvelope(
  answer: Answer,
  expected: { status: number; code: string; param?: string | RegExp },
): void {
  expect(answer.status).toBe(expected.status);
  expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
  const { body } = answer;
  expect(body.object).toBe("response");
  expect(body.status).toBe("failed");
  expect(typeof body.id).toBe("string");
  const error = errorOf(body);
  expect(typeof error.message).toBe("string");
  expect((error.message as string).length).toBeGreaterThan(0);
  expect(error.code).toBe(expected.code);
  expect(typeof error.type).toBe("string");
  // `param` is emitted only where a field is to blame (spec 2.2: "some error sites").
  if (expected.param === null) expect("param" in error).toBe(false);
  if (expected.param instanceof RegExp) expect(error.param).toMatch(expected.param);
  else if (expected.param !== undefined) expect(error.param).toBe(expected.param);
}

/** Spec 2.4 ErrorEnvelope: `{ error: { message (required), type, param, code } }`. */
export function expectErrorEnvelope(answer: Answer, status: number, code: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
  const error = errorOf(answer.body);
  expect(typeof error.message).toBe("string");
  expect((error.message as string).length).toBeGreaterThan(0);
  expect(error.code).toBe(code);
  expect(answer.body.status, "an ErrorEnvelope, not a Responses object").toBeUndefined();
}

/** Polls until `check` returns true, or fails after `timeoutMs`. */
export async function until(
  what: string,
  check: () => boolean,
  timeoutMs = 15_000,
  stepMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, stepMs));
  }
}

/** The spec's exact 401 body on the payment route (2.4 PaymentSignatureError). */
export const INVALID_PAY_SIGNATURE_TEXT = '{"error":"invalid_pay_signature"}';

/** The spec's exact 500 body (section 7). */
export const INTERNAL_ERROR_TEXT = '{"error":{"type":"internal_error","message":"Internal error"}}';

export interface BrokenGateway {
  url: string;
  close(): Promise<void>;
}

/**
 * A second listening gateway over the platform's own registry, upstream, keys
 * and rate limits, whose durable outboxes (usage journal and settlement
 * journal) are real but closed, as after a failed disk: `append` rejects, so
 * a request that reached a runtime fails inside the gateway. This is the
 * genuine unexpected failure behind spec 7's 500 row; the platform's own
 * outboxes are not reachable from its dependencies to close them in place.
 */
export async function startBrokenGateway(p: Platform): Promise<BrokenGateway> {
  const quiet = pino({ level: "silent" });
  const retry = { baseDelayMs: 500, maxDelayMs: 1_000 };
  const usage = new DurableOutbox<UsageRecord>({
    dir: join(p.stateDir, "broken", "usage"),
    name: "usage",
    send: () => Promise.resolve(),
    retry,
    logger: quiet,
  });
  const settlements = new DurableOutbox<SettlementRecord>({
    dir: join(p.stateDir, "broken", "settlements"),
    name: "settlements",
    send: () => Promise.resolve(),
    retry,
    logger: quiet,
  });
  await usage.open();
  await settlements.open();
  await usage.close();
  await settlements.close();
  const client = new PaymentProviderClient({
    baseUrl: p.provider.url,
    credential: p.provider.credential,
  });
  const gateway: FastifyInstance = buildGateway({
    ...p.components.deps,
    meter: new Meter({ registry: new Registry(), outbox: usage }),
    pay: {
      secrets: new Map([["k1", [SECRETS.k1]]]),
      toleranceSeconds: 300,
      usedSignatures: new InProcessUsedSignatures(),
      checkAllowance: (request) => client.checkAllowance(request),
      settlements: { settle: (record) => settlements.append(record.responseId, record) },
    },
  });
  const url = await gateway.listen({ host: "127.0.0.1", port: 0 });
  return {
    url,
    async close() {
      await gateway.close();
      await client.close();
    },
  };
}

/** POST a JSON body to `path` of `url` with extra headers. */
export function post(
  url: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}
