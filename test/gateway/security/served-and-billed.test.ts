import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import { standInRuntime } from "../support/stand-in-runtime.js";
import { until } from "../conformance/support.js";

/**
 * What is billed is what the caller got, found by a round of attacks on the
 * payment route, each case failing on the gateway as it was before:
 *
 * - a runtime answer the gateway failed on after taking it (a 200 whose body
 *   is not JSON) was answered 500 and billed, and its signature given back,
 *   so that each retry was billed again;
 * - a client that hung up once its body was read did not cancel a whole
 *   answer, and one that left during the allowance check was settled for an
 *   answer it never read.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

const USAGE = { "x-modelgate-input-tokens": "3", "x-modelgate-output-tokens": "2" };
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let n = 0;
/** A body never sent before: its signature is fresh. */
const bodyFor = (model: string, extra: object = {}) =>
  JSON.stringify({
    model,
    input: "Hello",
    max_output_tokens: 2,
    metadata: { n: `sb-${++n}` },
    ...extra,
  });
const settledFor = (payRequestId: string) =>
  p.provider.ledger.settlements.filter((s) => s.payRequestId === payRequestId);

describe("an answer the gateway cannot pass on", () => {
  it("is a 502 that bills nothing and leaves the signature free for the retry", async () => {
    const runtime = await standInRuntime(p, "not-json", (res) => {
      res.writeHead(200, { "content-type": "application/json", ...USAGE });
      res.end("this is not JSON");
    });
    try {
      const raw = bodyFor("not-json");
      const signature = p.sign(raw);
      const headers = { "pay-request-id": "sb-not-json" };
      const first = await p.pay(raw, { signature, headers });
      expect(first.status).toBe(502);
      expect(((await first.json()) as { error: { code: string } }).error.code).toBe(
        "upstream_error",
      );
      expect(first.headers.get("pay-usage")).toBeNull();
      // The spec tells a client to retry a 5xx: the same signed request is not a replay.
      const retry = await p.pay(raw, { signature, headers });
      expect(retry.status).toBe(502);
      expect(runtime.hits()).toBe(2);
      await pause(500);
      expect(settledFor("sb-not-json")).toHaveLength(0);
    } finally {
      await runtime.close();
    }
  });
});

/**
 * A signed paid request whose client hangs up after `ms`, before any answer:
 * on a connection of its own, which leaving closes.
 */
async function payAndLeave(raw: string, payRequestId: string, ms: number): Promise<void> {
  const connection = new Agent();
  const sent = request(`${p.url}/pay/v1/responses`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "pay-signature": p.sign(raw),
      "pay-request-id": payRequestId,
    },
    body: raw,
    signal: AbortSignal.timeout(ms),
    dispatcher: connection,
  });
  await expect(sent).rejects.toThrow();
  await connection.destroy();
}

describe("a client that leaves", () => {
  it("cancels a whole answer's runtime request after its body was read", async () => {
    let closedAt: number | null = null;
    const runtime = await standInRuntime(p, "slow-whole", (res) => {
      res.once("close", () => {
        if (!res.writableFinished) closedAt = performance.now();
      });
      setTimeout(() => {
        if (res.destroyed) return;
        res.writeHead(200, { "content-type": "application/json", ...USAGE });
        res.end(JSON.stringify({ id: "resp_x", object: "response", output: [] }));
      }, 3_000);
    });
    try {
      await payAndLeave(bodyFor("slow-whole"), "sb-left-whole", 300);
      const leftAt = performance.now();
      await until("the runtime's request to be cancelled", () => closedAt !== null);
      expect(closedAt! - leftAt).toBeLessThan(1_000);
      await pause(3_000);
      expect(settledFor("sb-left-whole")).toHaveLength(0);
    } finally {
      await runtime.close();
    }
  });

  it.each([false, true])(
    "during the allowance check runs nothing and settles nothing (stream: %s)",
    async (stream) => {
      const runtime = await standInRuntime(p, `behind-check-${stream}`, (res) => {
        res.writeHead(200, { "content-type": "application/json", ...USAGE });
        res.end(JSON.stringify({ id: "resp_y", object: "response", output: [] }));
      });
      // The provider answers nothing: the check fails open after its 2 s timeout.
      await p.provider.setMode("hang", "check");
      try {
        const id = `sb-left-check-${stream}`;
        await payAndLeave(bodyFor(`behind-check-${stream}`, { stream }), id, 300);
        await until("the check to be asked", () =>
          p.provider.ledger.checks.some((c) => c.payRequestId === id),
        );
        await pause(3_000);
        expect(runtime.hits()).toBe(0);
        expect(settledFor(id)).toHaveLength(0);
      } finally {
        await p.provider.setMode("allow", "check");
        await runtime.close();
      }
    },
  );
});
