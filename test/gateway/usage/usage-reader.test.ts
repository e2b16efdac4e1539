import { describe, expect, it } from "vitest";
import type { LedgerEntry } from "../../../gateway/store/ledger-entry.js";
import { openStore, type Store } from "../../../gateway/store/store.js";
import { recordLedgerEntries } from "../../../gateway/store/usage-ledger.js";
import { planPage } from "../../../gateway/usage/page-plan.js";
import { readCompletionsUsage, readCosts } from "../../../gateway/usage/usage-reader.js";
import { onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "../store/engines.js";

const engines = useStoreEngines();

/** 2026-11-24T00:00:00Z: a day boundary. */
const DAY0 = Date.UTC(2026, 10, 24) / 1000;
const DAY = 86_400;

let counter = 0;
function entry(overrides: Partial<LedgerEntry> & { at: number }): LedgerEntry {
  counter += 1;
  const { at, ...rest } = overrides;
  return {
    responseId: `resp_${counter.toString().padStart(5, "0")}`,
    requestId: `req-${counter}`,
    route: "/v1/responses",
    account: "acme",
    project: "web",
    keyId: "key_a",
    agentId: null,
    model: "tiny-gpt",
    inputTokens: 10,
    outputTokens: 20,
    cost: "0.000225",
    currency: "EUR",
    time: new Date(at * 1000).toISOString(),
    ...rest,
  };
}

/** Two days of acme, one row of globex, one of the payment route. */
const ROWS = [
  entry({ at: DAY0 + 10 }),
  entry({ at: DAY0 + 3600, project: null, inputTokens: 5, outputTokens: 1, cost: "0.00001" }),
  entry({ at: DAY0 + DAY + 5, model: "tiny-nli", keyId: "key_b", cost: "0", currency: "USD" }),
  entry({ at: DAY0 + DAY + 7, account: "globex", project: "lab", keyId: "key_g", cost: "1.5" }),
  entry({
    at: DAY0 + 2 * DAY - 1,
    route: "/pay/v1/responses",
    account: "pay",
    project: null,
    keyId: "k1",
    agentId: "agent-7",
    inputTokens: 100,
    outputTokens: 100,
    cost: "0.00125",
  }),
];

async function ledgerWithRows(target: Parameters<typeof openStore>[0]): Promise<Store> {
  const store = await openStore(target);
  onCleanup(() => store.close());
  await recordLedgerEntries(store.db, ROWS);
  return store;
}

const twoDays = (limit = 7, pageStart?: number) =>
  planPage({
    startTime: DAY0,
    endTime: DAY0 + 2 * DAY,
    widthSeconds: DAY,
    limit,
    ...(pageStart !== undefined ? { pageStart } : {}),
  });

describe("page plan", () => {
  it("aligns buckets to the width, counts only the asked range, and pages by limit", () => {
    const plan = planPage({
      startTime: DAY0 + 100,
      endTime: DAY0 + 3 * DAY,
      widthSeconds: DAY,
      limit: 2,
    });
    expect(plan.bucketStarts).toEqual([DAY0, DAY0 + DAY]);
    expect([plan.from, plan.to, plan.nextPageStart]).toEqual([
      DAY0 + 100,
      DAY0 + 2 * DAY,
      DAY0 + 2 * DAY,
    ]);
    const next = planPage({
      startTime: DAY0 + 100,
      endTime: DAY0 + 3 * DAY,
      widthSeconds: DAY,
      limit: 2,
      pageStart: plan.nextPageStart!,
    });
    expect(next.bucketStarts).toEqual([DAY0 + 2 * DAY]);
    expect([next.from, next.to, next.nextPageStart]).toEqual([
      DAY0 + 2 * DAY,
      DAY0 + 3 * DAY,
      null,
    ]);
    // A cursor before the range starts at the range.
    expect(
      planPage({
        startTime: DAY0,
        endTime: DAY0 + DAY,
        widthSeconds: 3600,
        limit: 24,
        pageStart: 5,
      }).bucketStarts[0],
    ).toBe(DAY0);
    // An empty range: no bucket.
    expect(
      planPage({ startTime: DAY0, endTime: DAY0, widthSeconds: DAY, limit: 7 }).bucketStarts,
    ).toEqual([]);
  });
});

describe.each(engines)("usage reads on $name", (engine) => {
  it("an account reads its own rows only, per day, with totals", async () => {
    const { db } = await ledgerWithRows(await engine.newTarget());
    const answer = await readCompletionsUsage(
      db,
      { kind: "account", account: "acme" },
      {},
      undefined,
      twoDays(),
    );
    expect(answer.buckets.map((b) => [b.start_time, b.end_time])).toEqual([
      [DAY0, DAY0 + DAY],
      [DAY0 + DAY, DAY0 + 2 * DAY],
    ]);
    const sums = answer.buckets.map((b) =>
      b.results.map((r) => [r.input_tokens, r.output_tokens, r.num_model_requests]),
    );
    expect(sums).toEqual([[[15, 21, 2]], [[10, 20, 1]]]);
    expect(answer.buckets[0]!.results[0]).toMatchObject({
      object: "organization.usage.completions.result",
      project_id: null,
      model: null,
      account_id: null,
    });
    expect([
      answer.totals.input_tokens,
      answer.totals.output_tokens,
      answer.totals.num_model_requests,
    ]).toEqual([25, 41, 3]);
  });

  it("reports the input tokens read from the prefix cache, 0 for entries that carry none", async () => {
    const { db } = await ledgerWithRows(await engine.newTarget());
    await recordLedgerEntries(db, [
      entry({ at: DAY0 + 20, inputTokens: 300, cachedTokens: 256 }),
      entry({ at: DAY0 + 30, model: "tiny-nli", inputTokens: 70, cachedTokens: 64 }),
      entry({ at: DAY0 + DAY + 9, inputTokens: 80, cachedTokens: 0 }),
    ]);
    const answer = await readCompletionsUsage(
      db,
      { kind: "account", account: "acme" },
      {},
      ["model"],
      twoDays(),
    );
    const cached = answer.buckets.map((b) =>
      b.results.map((r) => [r.model, r.input_tokens, r.input_cached_tokens]),
    );
    expect(cached).toEqual([
      [
        ["tiny-gpt", 315, 256],
        ["tiny-nli", 70, 64],
      ],
      [
        ["tiny-gpt", 80, 0],
        ["tiny-nli", 10, 0],
      ],
    ]);
    expect(answer.totals.input_cached_tokens).toBe(320);
    const other = await readCompletionsUsage(
      db,
      { kind: "account", account: "globex" },
      {},
      undefined,
      twoDays(),
    );
    expect(other.totals.input_cached_tokens).toBe(0);
  });

  it("groups by model, project, key and route; filters never reach another account", async () => {
    const { db } = await ledgerWithRows(await engine.newTarget());
    const acme = { kind: "account", account: "acme" } as const;
    const byModel = await readCompletionsUsage(
      db,
      acme,
      {},
      ["model", "project_id", "api_key_id", "route"],
      twoDays(),
    );
    expect(
      byModel.buckets[0]!.results.map((r) => [
        r.model,
        r.project_id,
        r.api_key_id,
        r.route,
        r.num_model_requests,
      ]),
    ).toEqual([
      ["tiny-gpt", "web", "key_a", "/v1/responses", 1],
      ["tiny-gpt", null, "key_a", "/v1/responses", 1],
    ]);
    expect(byModel.buckets[1]!.results.map((r) => r.model)).toEqual(["tiny-nli"]);
    // globex's project and key, asked for by acme: nothing.
    const reach = await readCompletionsUsage(
      db,
      acme,
      { projectIds: ["lab"], apiKeyIds: ["key_g"] },
      undefined,
      twoDays(),
    );
    expect(reach.buckets.flatMap((b) => b.results)).toEqual([]);
    expect(reach.totals.num_model_requests).toBe(0);
    const filtered = await readCompletionsUsage(
      db,
      acme,
      { models: ["tiny-nli"] },
      undefined,
      twoDays(),
    );
    expect(filtered.totals.num_model_requests).toBe(1);
  });

  it("an admin reads every account, may group and filter by account", async () => {
    const { db } = await ledgerWithRows(await engine.newTarget());
    const admin = { kind: "admin" } as const;
    const all = await readCompletionsUsage(db, admin, {}, ["account_id"], twoDays());
    expect(all.buckets[1]!.results.map((r) => [r.account_id, r.num_model_requests])).toEqual([
      ["acme", 1],
      ["globex", 1],
      ["pay", 1],
    ]);
    expect(all.totals.num_model_requests).toBe(ROWS.length);
    const globex = await readCompletionsUsage(
      db,
      admin,
      { accountIds: ["globex"] },
      undefined,
      twoDays(),
    );
    expect(globex.totals.input_tokens).toBe(10);
  });

  it("pages: has the next page's buckets only", async () => {
    const { db } = await ledgerWithRows(await engine.newTarget());
    const acme = { kind: "account", account: "acme" } as const;
    const first = twoDays(1);
    expect(first.nextPageStart).toBe(DAY0 + DAY);
    const page1 = await readCompletionsUsage(db, acme, {}, undefined, first);
    expect(page1.buckets.map((b) => b.results[0]?.num_model_requests)).toEqual([2]);
    const page2 = await readCompletionsUsage(
      db,
      acme,
      {},
      undefined,
      twoDays(1, first.nextPageStart!),
    );
    expect(page2.buckets.map((b) => [b.start_time, b.results[0]?.num_model_requests])).toEqual([
      [DAY0 + DAY, 1],
    ]);
    // Totals are over the whole range on every page.
    expect(page2.totals.num_model_requests).toBe(3);
  });

  it("hourly and per-minute buckets put each row in its own", async () => {
    const { db } = await ledgerWithRows(await engine.newTarget());
    const acme = { kind: "account", account: "acme" } as const;
    const hours = await readCompletionsUsage(
      db,
      acme,
      {},
      undefined,
      planPage({ startTime: DAY0, endTime: DAY0 + DAY, widthSeconds: 3600, limit: 24 }),
    );
    expect(hours.buckets).toHaveLength(24);
    expect(hours.buckets.map((b) => b.results.length)).toEqual([
      1,
      1,
      ...Array<number>(22).fill(0),
    ]);
    const minutes = await readCompletionsUsage(
      db,
      acme,
      {},
      undefined,
      planPage({ startTime: DAY0, endTime: DAY0 + 120, widthSeconds: 60, limit: 60 }),
    );
    expect(minutes.buckets.map((b) => b.results[0]?.input_tokens ?? 0)).toEqual([10, 0]);
  });

  it("costs sum the recorded cost exactly, per currency, by line item (the model)", async () => {
    const { db } = await ledgerWithRows(await engine.newTarget());
    const acme = { kind: "account", account: "acme" } as const;
    const costs = await readCosts(db, acme, {}, ["line_item"], twoDays());
    expect(costs.buckets[0]!.results).toEqual([
      {
        object: "organization.costs.result",
        amount: { value: 0.000235, value_decimal: "0.000235", currency: "eur" },
        line_item: "tiny-gpt",
        project_id: null,
        account_id: null,
      },
    ]);
    expect(
      costs.buckets[1]!.results.map((r) => [
        r.line_item,
        r.amount.value_decimal,
        r.amount.currency,
      ]),
    ).toEqual([["tiny-nli", "0", "usd"]]);
    expect(costs.totals.map((t) => [t.amount.value_decimal, t.amount.currency])).toEqual([
      ["0.000235", "eur"],
      ["0", "usd"],
    ]);
    const admin = await readCosts(db, { kind: "admin" }, {}, ["account_id"], twoDays());
    expect(admin.totals.map((t) => [t.amount.value_decimal, t.amount.currency])).toEqual([
      ["1.501485", "eur"],
      ["0", "usd"],
    ]);
  });
});
