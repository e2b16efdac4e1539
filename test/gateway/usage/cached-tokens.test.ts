import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionsUsagePageSchema } from "../../../api/usage.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { until } from "../../support/until.js";

/**
 * Cached input tokens from the runtime to the ledger and the usage API: the
 * same long prompt asked twice (whole, then streamed) is read the second time
 * from the runtime's prefix cache; the ledger row records the cached tokens
 * the answer reported, and `input_cached_tokens` sums them.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform({ withoutPayments: true });
});
afterAll(async () => p?.close());

interface Usage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
}

describe("cached input tokens in the ledger and the usage API", () => {
  it("records what each answer reported and sums it", async () => {
    const input = `Tell me about ships, ${"slowly and ".repeat(30)}in detail`;
    const body = { model: "tiny-gpt", input, max_output_tokens: 4, temperature: 0 };
    const first = (await (await p.api(body)).json()) as { id: string; usage: Usage };
    const again = await p.api({ ...body, stream: true });
    const events = (await again.text()).trim().split("\n\n");
    const last = events.at(-1)!;
    const streamed = (
      JSON.parse(last.slice(last.indexOf("data: ") + 6)) as {
        response: { id: string; usage: Usage };
      }
    ).response;
    expect(first.usage.input_tokens_details.cached_tokens).toBe(0);
    const cached = streamed.usage.input_tokens_details.cached_tokens;
    expect(cached).toBeGreaterThanOrEqual(64);

    const db = await p.components.store.db();
    const rows = await until(
      () =>
        db
          .selectFrom("usage_ledger")
          .select(["response_id", "cached_tokens"])
          .where("response_id", "in", [first.id, streamed.id])
          .execute(),
      (r) => r.length === 2,
    );
    expect(Object.fromEntries(rows.map((r) => [r.response_id, r.cached_tokens]))).toEqual({
      [first.id]: 0,
      [streamed.id]: cached,
    });

    const now = Math.floor(Date.now() / 1000);
    const res = await fetch(
      `${p.url}/v1/organization/usage/completions?start_time=${now - 3600}&models=tiny-gpt`,
      { headers: { "x-api-key": p.keys.acme.key } },
    );
    expect(res.status).toBe(200);
    const page = completionsUsagePageSchema.parse(await res.json());
    const reported = page.data.flatMap((b) => b.results).map((r) => r.input_cached_tokens);
    expect(reported.reduce((a, b) => a + b, 0)).toBe(cached);
  }, 60_000);
});
