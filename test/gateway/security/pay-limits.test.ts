import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parsePayUsage } from "../../../gateway/pay/pay-usage.js";
import { eventually } from "../../support/cluster.js";
import { SECRETS, startPlatform, type Platform } from "../support/platform.js";

/**
 * Two holes a round of attacks on the payment route found, each case failing
 * on the gateway as it was before:
 *
 * - its rate limit was keyed by the unsigned `pay-agent-id`: one read
 *   signature (a read's may be sent again within the tolerance) sent under
 *   another agent's name emptied that agent's bucket, and renaming the agent
 *   on each request escaped the limit;
 * - the signature was spent before the rate limit and the runtime, so the
 *   retry the spec prescribes for a 429 or a 408 was refused as a replay
 *   (401, "do not retry") though nothing had been served or settled.
 *
 * The limit here: a burst of 3 requests, 60 a minute (one a second back).
 */
const BURST = 3;
let p: Platform;
beforeAll(async () => {
  p = await startPlatform({
    config: { rateLimitPerMinute: 60, rateLimitBurst: BURST, requestTimeout: 2 },
  });
});
afterAll(async () => p?.close());

let bodies = 0;
const freshBody = (model = "tiny-gpt") =>
  JSON.stringify({
    model,
    input: "Hello",
    max_output_tokens: 2,
    metadata: { n: `pl-${++bodies}` },
  });

/** A read of a stored response no one made: signed over its target, answered 404 unless limited. */
function read(kid: "k1" | "k2", agent: string, signature?: string) {
  const path = "/pay/v1/responses/resp_000000000000000000000000000000000000000000000000";
  const secret = kid === "k1" ? SECRETS.k1 : SECRETS.k2new;
  return fetch(`${p.url}${path}`, {
    headers: {
      "pay-signature": signature ?? p.sign(`GET ${path}`, kid, secret),
      "pay-agent-id": agent,
    },
  });
}

/** Spends a kid's bucket to its last request, naming whichever agent. */
async function drain(kid: "k1" | "k2", agent = "drainer"): Promise<void> {
  for (let i = 0; i < 20; i++) if ((await read(kid, agent)).status === 429) return;
  throw new Error(`${kid}'s bucket was never empty`);
}

/** Waits until a kid's bucket holds a request again (a read spends it). */
async function refilled(kid: "k1" | "k2"): Promise<void> {
  await eventually(async () => expect((await read(kid, "waiter")).status).toBe(404), 5_000);
  // That read took the token back: wait for the next.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
}

describe("the payment route's rate limit is the signing kid's, not pay-agent-id's", () => {
  it("renaming the agent on each request does not escape the limit", async () => {
    const path = "/pay/v1/responses/resp_000000000000000000000000000000000000000000000000";
    const signature = p.sign(`GET ${path}`);
    const statuses: number[] = [];
    for (let i = 0; i < BURST + 2; i++) {
      statuses.push((await read("k1", `rotating-${i}`, signature)).status);
    }
    expect(statuses.slice(0, BURST)).toEqual(Array(BURST).fill(404));
    expect(statuses.slice(BURST)).toEqual([429, 429]);
  });

  it("requests signed by one kid under another agent's name take nothing from that agent's kid", async () => {
    // The attacker holds k1's signatures and names the victim, whose provider signs as k2.
    await drain("k1", "victim-agent");
    const victim = await read("k2", "victim-agent");
    expect(victim.status).toBe(404);
    expect(victim.headers.get("x-ratelimit-remaining-requests")).toBe(String(BURST - 1));
  });
});

describe("a refusal the spec says to retry gives the payment signature back", () => {
  it("429: the same signed request is served once the bucket refills, and only once", async () => {
    await drain("k2");
    const raw = freshBody();
    const signature = p.sign(raw, "k2", SECRETS.k2new);
    const limited = await p.pay(raw, { signature });
    expect(limited.status).toBe(429);
    const wait = Number(limited.headers.get("retry-after"));
    expect(wait).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, wait * 1000 + 100));
    const retried = await p.pay(raw, { signature });
    expect(retried.status).toBe(200);
    expect(retried.headers.get("pay-usage")).toMatch(/output_tokens=/);
    // Served now: spent for good.
    const replayed = await p.pay(raw, { signature });
    expect(replayed.status).toBe(401);
    expect(await replayed.json()).toEqual({ error: "invalid_pay_signature" });
  });

  it("408: a runtime that did not answer leaves the signature free for the retry", async () => {
    await refilled("k1");
    const raw = freshBody("hung");
    const signature = p.sign(raw);
    const first = await p.pay(raw, { signature });
    expect(first.status).toBe(408);
    await refilled("k1");
    const retried = await p.pay(raw, { signature });
    expect(retried.status).toBe(408);
  });

  it("a refusal not to be retried unchanged (400) keeps it spent", async () => {
    await refilled("k1");
    const raw = JSON.stringify({ model: "tiny-gpt", metadata: { n: `pl-${++bodies}` } });
    const signature = p.sign(raw);
    const bad = await p.pay(raw, { signature });
    expect(bad.status).toBe(400);
    const again = await p.pay(raw, { signature });
    expect(again.status).toBe(401);
  });
});

describe("the allowance asked of the provider", () => {
  it("is the model's limit for text generation, however large max_output_tokens", async () => {
    await refilled("k2");
    const raw = JSON.stringify({
      model: "tiny-gpt",
      input: "Hello",
      max_output_tokens: 2_147_483_647,
      metadata: { n: `pl-${++bodies}` },
    });
    const answer = await p.pay(raw, { signature: p.sign(raw, "k2", SECRETS.k2new) });
    expect(answer.status).toBe(200);
    const { id } = (await answer.json()) as { id: string };
    // Input and output share tiny-gpt's 256 tokens: the worst case is 256, not 256 + 2^31.
    expect(p.provider.ledger.checks.find((c) => c.responseId === id)?.maxTokens).toBe(256);
  });

  it("counts a classifier's candidate labels, which the runtime bills beside the input", async () => {
    await refilled("k2");
    // Ten long labels: each is billed in its hypothesis, and no token limit bounds them.
    const categories = Array.from(
      { length: 10 },
      (_, i) => `label ${i} ${"very ".repeat(400)}long`,
    );
    const raw = JSON.stringify({ model: "tiny-nli", input: "x", categories });
    const answer = await p.pay(raw, { signature: p.sign(raw, "k2", SECRETS.k2new) });
    expect(answer.status).toBe(200);
    const usage = parsePayUsage(answer.headers.get("pay-usage") ?? undefined);
    if (!usage) throw new Error("no pay-usage on a served paid answer");
    // A classifier's answer is a bare score object with no id: this file's requests run one at a time.
    const asked = p.provider.ledger.checks.at(-1)?.maxTokens;
    // The labels alone are thousands of tokens; the old bound asked for 4,097.
    expect(usage.inputTokens).toBeGreaterThan(4_097);
    expect(asked).toBeGreaterThanOrEqual(usage.inputTokens + usage.outputTokens);
  });
});
