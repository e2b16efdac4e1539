import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOf } from "../../../gateway/metering/cost.js";
import { PAY_ACCOUNT } from "../../../gateway/metering/to-ledger.js";
import { GEN, NLI } from "../conformance/support.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { useStoreEngines, type StoreEngineHarness } from "../store/engines.js";
import { until } from "../../support/until.js";

/**
 * The real gateway, its journals and its ledger, on the embedded default
 * (PGlite in the state folder) and on a PostgreSQL server (--database-url):
 * every answered request on either route becomes exactly one ledger row,
 * priced at the model's prices; refused requests leave none.
 */
const engines = useStoreEngines();
let p: Platform;

interface Answered {
  id: string;
  route: string;
  model: string;
  usage: { input_tokens: number; output_tokens: number };
}

async function answered(response: Response, route: string): Promise<Answered> {
  expect(response.status).toBe(200);
  const body = (await response.json()) as Omit<Answered, "route">;
  return { ...body, route };
}

async function ledgerRows(platform: Platform = p) {
  const db = await platform.components.store.db();
  return db.selectFrom("usage_ledger").selectAll().orderBy("response_id").execute();
}

async function platformOn(engine: StoreEngineHarness): Promise<Platform> {
  const target = await engine.newTarget();
  return startPlatform("url" in target ? { config: { databaseUrl: target.url } } : {});
}

describe.each(engines)("usage ledger behind the real gateway, on $name", (engine) => {
  beforeAll(async () => {
    p = await platformOn(engine);
  });
  afterAll(async () => {
    await p?.close();
  });

  it("holds exactly one row per answered request, none for refused ones", async () => {
    const served: Answered[] = [];
    for (let i = 0; i < 3; i += 1) served.push(await answered(await p.api(GEN), "/v1/responses"));
    // A classification answer is no Responses object (no id, usage in headers only).
    const classified = await p.api(NLI, {
      key: p.keys.acmeWeb.key,
      headers: { "x-project-id": "web" },
    });
    expect(classified.status).toBe(200);
    for (let i = 0; i < 2; i += 1) {
      served.push(
        await answered(
          await p.pay(GEN, { headers: { "pay-agent-id": "agent-7" } }),
          "/pay/v1/responses",
        ),
      );
    }
    // Refused: a revoked key, an unknown model, an unsigned payment.
    expect((await p.api(GEN, { key: p.keys.revoked.key })).status).toBe(401);
    expect((await p.api({ ...GEN, model: "no-such-model" })).status).toBe(400);
    expect((await p.pay(GEN, { signature: null })).status).toBe(401);

    const rows = await until(ledgerRows, (r) => r.length >= served.length + 1);
    // Nothing more arrives later: duplicates would come in a second delivery.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await ledgerRows()).toEqual(rows);

    const expected = served
      .map((s) => ({
        response_id: s.id,
        route: s.route,
        model: s.model,
        tokens: [s.usage.input_tokens, s.usage.output_tokens],
      }))
      .sort((a, b) => a.response_id.localeCompare(b.response_id));
    const nlis = rows.filter((row) => row.model === "tiny-nli");
    expect(nlis).toHaveLength(1);
    const nli = nlis[0]!;
    expect(
      rows
        .filter((row) => row !== nli)
        .map((row) => ({
          response_id: row.response_id,
          route: row.route,
          model: row.model,
          tokens: [row.input_tokens, row.output_tokens],
        })),
    ).toEqual(expected);

    const byId = new Map(rows.map((row) => [row.response_id, row]));
    for (const s of served) {
      const row = byId.get(s.id)!;
      if (s.route === "/v1/responses") {
        expect(row.account).toBe("acme");
        expect(row.agent_id).toBeNull();
      } else {
        expect(row.account).toBe(PAY_ACCOUNT);
        expect(row.key_id).toBe("k1");
        expect(row.agent_id).toBe("agent-7");
      }
    }
    expect([nli.route, nli.account, nli.project, nli.key_id]).toEqual([
      "/v1/responses",
      "acme",
      "web",
      p.keys.acmeWeb.id,
    ]);

    // tiny-gpt is priced (2.5 and 10 EUR per million tokens); tiny-nli is free.
    const gpt = byId.get(served[0]!.id)!;
    const tokens = { inputTokens: gpt.input_tokens, outputTokens: gpt.output_tokens };
    expect(gpt.input_tokens).toBeGreaterThan(0);
    expect([gpt.cost, gpt.currency]).toEqual([
      costOf(tokens, { inputPerMillionTokens: "2.5", outputPerMillionTokens: "10" }),
      "EUR",
    ]);
    expect(Number(gpt.cost)).toBeGreaterThan(0);
    expect([nli.cost, nli.currency]).toEqual(["0", "USD"]);
  });
});

describe("usage ledger while its PostgreSQL server is down", () => {
  const postgres = engines.find((engine) => engine.name === "postgres")!;

  it("serves, keeps the records waiting in the journal, and lands each once when it is back", async () => {
    const server = await postgres.server();
    const url = await server.createDatabase();
    await server.halt();
    const platform = await startPlatform({ config: { databaseUrl: url } });
    try {
      // Down from the start: the gateway serves and the store cannot open.
      const ids: string[] = [];
      const serve = async () => {
        const res = await platform.api(GEN);
        ids.push((await answered(res, "/v1/responses")).id);
      };
      await serve();
      await serve();
      const metric = async (pattern: RegExp) => {
        const text = await (await fetch(`${platform.opsUrl}/metrics`)).text();
        return Number(pattern.exec(text)?.[1]);
      };
      const pending = () => metric(/modelgate_outbox_pending_records\{outbox="usage"\} (\d+)/);
      const storeUp = () => metric(/^modelgate_gateway_store_up (\d+)$/m);
      expect(await pending()).toBe(2);
      expect(await storeUp()).toBe(0);
      await server.resume();
      expect(platform.logLines.join("\n")).toContain("store unavailable");
      const rows = await until(
        () => ledgerRows(platform),
        (r) => r.length >= 2,
      );
      expect(rows.map((row) => row.response_id).sort()).toEqual([...ids].sort());
      expect(await storeUp()).toBe(1);

      // Down again once open: the pool's connections are cut.
      await server.halt();
      await serve();
      await serve();
      await until(storeUp, (up) => up === 0);
      expect(await storeUp()).toBe(0);
      expect(await pending()).toBe(2);
      await server.resume();
      await until(
        () => ledgerRows(platform),
        (r) => r.length >= 4,
      );
      await until(pending, (n) => n === 0);
      expect(await storeUp()).toBe(1);
      expect((await ledgerRows(platform)).map((row) => row.response_id).sort()).toEqual(
        [...ids].sort(),
      );
    } finally {
      await platform.close();
    }
  });
});
