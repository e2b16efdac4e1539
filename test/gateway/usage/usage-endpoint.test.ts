import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorEnvelopeSchema } from "../../../api/error-envelope.js";
import { completionsUsagePageSchema, costsPageSchema } from "../../../api/usage.js";
import { costOf } from "../../../gateway/metering/cost.js";
import { GEN } from "../conformance/support.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { useStoreEngines } from "../store/engines.js";
import { until } from "../../support/until.js";

/**
 * The usage endpoints behind the real gateway, on the embedded ledger and
 * on a PostgreSQL server: what each key reads is what its account was
 * served, never another account's; an admin key reads every account's.
 */
const engines = useStoreEngines();
const PRICES = { inputPerMillionTokens: "2.5", outputPerMillionTokens: "10" };

interface Served {
  id: string;
  usage: { input_tokens: number; output_tokens: number };
}

/** Every answer is checked against the schema the OpenAPI document publishes. */
const usagePage = async (res: Response) => completionsUsagePageSchema.parse(await res.json());
const costsPage = async (res: Response) => costsPageSchema.parse(await res.json());
const envelope = async (res: Response) => errorEnvelopeSchema.parse(await res.json());

function sum(served: readonly Served[]) {
  return {
    input_tokens: served.reduce((n, s) => n + s.usage.input_tokens, 0),
    output_tokens: served.reduce((n, s) => n + s.usage.output_tokens, 0),
    num_model_requests: served.length,
  };
}

/** Adds the cost of each request, as the ledger records it, exactly (in millionths of millionths). */
function costSum(served: readonly Served[]): string {
  const total = served.reduce(
    (n, s) =>
      n +
      Number(
        costOf({ inputTokens: s.usage.input_tokens, outputTokens: s.usage.output_tokens }, PRICES),
      ) *
        1e12,
    0,
  );
  return String(Math.round(total) / 1e12);
}

describe.each(engines)("usage endpoints on $name", (engine) => {
  let p: Platform;
  const acme: Served[] = [];
  const globex: Served[] = [];
  const start = Math.floor(Date.now() / 1000) - 60;

  const get = (path: string, key: string | null, query: string) =>
    fetch(`${p.url}${path}?${query}`, { headers: key ? { "x-api-key": key } : {} });
  const usage = (key: string | null, query = "") =>
    get("/v1/organization/usage/completions", key, `start_time=${start}${query}`);
  const costs = (key: string | null, query = "") =>
    get("/v1/organization/costs", key, `start_time=${start}${query}`);

  beforeAll(async () => {
    const target = await engine.newTarget();
    p = await startPlatform("url" in target ? { config: { databaseUrl: target.url } } : {});
    for (let i = 0; i < 3; i += 1) {
      const res = await p.api(GEN, i === 2 ? { headers: { "x-project-id": "web" } } : {});
      expect(res.status).toBe(200);
      acme.push((await res.json()) as Served);
    }
    const res = await p.api(GEN, { key: p.keys.limited.key });
    expect(res.status).toBe(200);
    globex.push((await res.json()) as Served);
    expect((await p.pay(GEN)).status).toBe(200);
    const db = await p.components.store.db();
    await until(
      () => db.selectFrom("usage_ledger").select("response_id").execute(),
      (rows) => rows.length >= 5,
    );
  });
  afterAll(async () => {
    await p?.close();
  });

  it("an account reads its own usage: totals equal what it was served", async () => {
    const res = await usage(p.keys.acme.key);
    expect(res.status).toBe(200);
    const page = await usagePage(res);
    expect(page.object).toBe("page");
    expect(page.has_more).toBe(false);
    expect(page.totals).toMatchObject(sum(acme));
    const results = page.data.flatMap((bucket) => bucket.results);
    expect(results.reduce((n, r) => n + r.num_model_requests, 0)).toBe(3);
    // Another key of the same account reads the same; globex reads its own only.
    const web = await usagePage(await usage(p.keys.acmeWeb.key));
    expect(web.totals).toMatchObject(sum(acme));
    const other = await usagePage(await usage(p.keys.limited.key));
    expect(other.totals).toMatchObject(sum(globex));
  });

  it("groups by project and key; another account's project or key reads nothing", async () => {
    const res = await usage(p.keys.acme.key, "&group_by=project_id&group_by[]=api_key_id");
    const page = await usagePage(res);
    const results = page.data.flatMap((b) => b.results);
    const web = results.filter((r) => r.project_id === "web");
    expect(web.reduce((n, r) => n + r.num_model_requests, 0)).toBe(1);
    expect(new Set(results.map((r) => r.api_key_id))).toEqual(new Set([p.keys.acme.id]));
    const lab = await usagePage(await usage(p.keys.acme.key, "&project_ids=lab"));
    expect(lab.totals.num_model_requests).toBe(0);
    const key = await usagePage(await usage(p.keys.acme.key, `&api_key_ids=${p.keys.limited.id}`));
    expect(key.totals.num_model_requests).toBe(0);
  });

  it("a member key may not name or group by accounts (403); an admin key reads every account", async () => {
    for (const query of ["&account_ids=globex", "&group_by=account_id"]) {
      const res = await usage(p.keys.acme.key, query);
      expect(res.status).toBe(403);
      const body = await envelope(res);
      expect(body.error.param).toBe(query.startsWith("&account") ? "account_ids" : "group_by");
    }
    const res = await usage(p.keys.admin.key, "&group_by=account_id");
    expect(res.status).toBe(200);
    const page = await usagePage(res);
    const byAccount = new Map<string, number>();
    for (const r of page.data.flatMap((b) => b.results)) {
      byAccount.set(r.account_id!, (byAccount.get(r.account_id!) ?? 0) + r.num_model_requests);
    }
    expect(Object.fromEntries(byAccount)).toEqual({ acme: 3, globex: 1, pay: 1 });
    const only = await usagePage(await usage(p.keys.admin.key, "&account_ids=acme"));
    expect(only.totals).toMatchObject(sum(acme));
  });

  it("costs are the ledger's recorded prices: the sum of each request's cost", async () => {
    const res = await costs(p.keys.acme.key, "&group_by=line_item");
    expect(res.status).toBe(200);
    const page = await costsPage(res);
    expect(page.totals).toHaveLength(1);
    const total = page.totals[0]!;
    expect(total.amount.currency).toBe("eur");
    expect(Number(total.amount.value_decimal)).toBeCloseTo(Number(costSum(acme)), 12);
    expect(Number(total.amount.value_decimal)).toBeGreaterThan(0);
    const items = page.data.flatMap((b) => b.results);
    expect(items.map((r) => r.line_item)).toEqual(["tiny-gpt"]);
    // globex's key has a burst of 2 requests (spent above): its admin reads it.
    const theirs = await costsPage(await costs(p.keys.admin.key, "&account_ids=globex"));
    expect(Number(theirs.totals[0]!.amount.value_decimal)).toBeCloseTo(Number(costSum(globex)), 12);
  });

  it("a bad query is a 400 ErrorEnvelope naming the parameter; no key is a 401", async () => {
    const cases: Array<[string, string]> = [
      ["", "start_time"],
      ["start_time=yesterday", "start_time"],
      [`start_time=${start}&bucket_width=2d`, "bucket_width"],
      [`start_time=${start}&limit=0`, "limit"],
      [`start_time=${start}&group_by=user_id`, "group_by"],
      [`start_time=${start}&page=AAAA`, "page"],
      [`start_time=${start}&colour=blue`, "colour"],
      [`start_time=${start}&limit=5&limit=6`, "limit"],
    ];
    for (const [query, param] of cases) {
      const res = await get("/v1/organization/usage/completions", p.keys.acme.key, query);
      expect(res.status, query).toBe(400);
      const body = await envelope(res);
      expect(body.error.param, query).toBe(param);
      expect(body.error.code).toBe("invalid_query");
      if (query.includes("limit=5&limit=6")) {
        expect(body.error.message).toBe("'limit' is given more than once.");
      }
    }
    const hourly = await get(
      "/v1/organization/costs",
      p.keys.acme.key,
      `start_time=${start}&bucket_width=1h`,
    );
    expect(hourly.status).toBe(400);
    expect((await usage(null)).status).toBe(401);
    // A method with a body (QUERY) and no Content-Type: the path serves no
    // QUERY at all, a 405 naming what it serves, not a 400 or a 500.
    const query = await fetch(`${p.url}/v1/organization/costs?start_time=${start}`, {
      method: "QUERY",
      headers: { "x-api-key": p.keys.acme.key },
    });
    expect(query.status).toBe(405);
    expect(query.headers.get("allow")).toBe("GET, HEAD");
    expect(((await query.json()) as { error: { code: string } }).error.code).toBe(
      "method_not_allowed",
    );
  });

  it("pages by limit with next_page", async () => {
    const from = start - 3 * 3600;
    const query = (extra: string) =>
      get(
        "/v1/organization/usage/completions",
        p.keys.acme.key,
        `start_time=${from}&bucket_width=1h&limit=2${extra}`,
      );
    const first = await usagePage(await query(""));
    expect(first.data).toHaveLength(2);
    expect(first.has_more).toBe(true);
    expect(first.next_page).toMatch(/^page_\d+$/);
    let page = first;
    const seen = first.data.map((b) => b.start_time);
    while (page.has_more) {
      page = await usagePage(await query(`&page=${page.next_page}`));
      seen.push(...page.data.map((b) => b.start_time));
    }
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(new Set(seen).size).toBe(seen.length);
    expect(page.totals).toMatchObject(sum(acme));
  });
});
