import { sql, type Kysely } from "kysely";
import { pino } from "pino";
import type { Migration, MigrationProvider } from "kysely/migration";
import { describe, expect, it } from "vitest";
import { connectStore } from "../../../gateway/store/connect.js";
import type { Database } from "../../../gateway/store/database.js";
import { migrateToLatest } from "../../../gateway/store/migrate.js";
import { MIGRATIONS } from "../../../gateway/store/migrations/index.js";
import { openStore } from "../../../gateway/store/store.js";
import { recordLedgerEntries } from "../../../gateway/store/usage-ledger.js";
import { ledgerTotals } from "../replicas/replica-set.js";
import { useStoreEngines } from "./engines.js";

/**
 * An upgrade: a database on the previous release's schema, with rows in
 * it, migrated to this release's. The previous release is a prefix of
 * MIGRATIONS (every migration up to and including PREVIOUS_RELEASE), so
 * each migration added after it is tested here as the upgrade it is.
 * Bump PREVIOUS_RELEASE to the newest migration when a release ships.
 */
const PREVIOUS_RELEASE = "0001-usage-ledger";

const ALL = Object.keys(MIGRATIONS);
const PREVIOUS = ALL.slice(0, ALL.indexOf(PREVIOUS_RELEASE) + 1);
const ADDED = ALL.slice(PREVIOUS.length);

function providerOf(names: readonly string[]): MigrationProvider {
  const chosen: Record<string, Migration> = {};
  for (const name of names) chosen[name] = MIGRATIONS[name]!;
  return { getMigrations: () => Promise.resolve(chosen) };
}

/**
 * Rows as the previous release wrote them: its own column list, in SQL, so
 * that columns added since (which must take defaults or NULL) are not named.
 */
async function writePreviousReleaseRows(db: Kysely<Database>): Promise<void> {
  await sql`
    INSERT INTO usage_ledger (response_id, route, account, project, key_id, agent_id, model,
      input_tokens, output_tokens, cost, currency, request_id, answered_at)
    VALUES
      ('resp_old_1', '/v1/responses', 'acme', 'web', 'key_1', NULL, 'tiny-gpt', 11, 3,
       '0.0000575', 'EUR', 'req-old-1', '2026-11-24T10:00:00Z'),
      ('resp_old_2', '/pay/v1/responses', 'pay', NULL, 'k1', 'agent-7', 'tiny-gpt', 7, 2,
       '0.0000375', 'EUR', 'req-old-2', '2026-11-24T11:00:00Z')
  `.execute(db);
}

const OLD_ROWS = [
  ["resp_old_1", "/v1/responses", "acme", "web", "key_1", null, 11, 3, "0.0000575", "EUR"],
  ["resp_old_2", "/pay/v1/responses", "pay", null, "k1", "agent-7", 7, 2, "0.0000375", "EUR"],
];

async function readOldRows(db: Kysely<Database>) {
  const rows = await db
    .selectFrom("usage_ledger")
    .selectAll()
    .where("response_id", "like", "resp_old_%")
    .orderBy("response_id")
    .execute();
  return rows.map((r) => [
    r.response_id,
    r.route,
    r.account,
    r.project,
    r.key_id,
    r.agent_id,
    r.input_tokens,
    r.output_tokens,
    r.cost,
    r.currency,
  ]);
}

const engines = useStoreEngines();

describe.each(engines)("store upgrade from the previous release's schema on $name", (engine) => {
  it("migrates the rows it holds intact, and this release's queries work on them", async () => {
    const target = await engine.newTarget();
    const { db } = await connectStore(target);
    try {
      expect(await migrateToLatest(db, providerOf(PREVIOUS))).toEqual(PREVIOUS);
      await writePreviousReleaseRows(db);
      // The upgrade, as the new gateway runs it on start.
      expect(await migrateToLatest(db)).toEqual(ADDED);
      expect(await readOldRows(db)).toEqual(OLD_ROWS);
      // This release's writes and reads beside the old rows: a new row lands
      // once, an old one sent again stays as first written.
      const inserted = await recordLedgerEntries(db, [
        {
          responseId: "resp_new_1",
          requestId: "req-new-1",
          route: "/v1/responses",
          account: "acme",
          project: null,
          keyId: "key_1",
          agentId: null,
          model: "tiny-gpt",
          inputTokens: 5,
          outputTokens: 1,
          cachedTokens: 4,
          cost: "0.0000225",
          currency: "EUR",
          time: "2026-11-25T09:00:00.000Z",
        },
        {
          responseId: "resp_old_1",
          requestId: "req-old-1",
          route: "/v1/responses",
          account: "acme",
          project: "web",
          keyId: "key_1",
          agentId: null,
          model: "tiny-gpt",
          inputTokens: 999,
          outputTokens: 999,
          cost: "1",
          currency: "EUR",
          time: "2026-11-24T10:00:00.000Z",
        },
      ]);
      expect(inserted).toBe(1);
      expect(await readOldRows(db)).toEqual(OLD_ROWS);
      expect(await ledgerTotals(db, "acme")).toEqual({
        requests: 2,
        inputTokens: 16,
        outputTokens: 4,
      });
      expect(await ledgerTotals(db)).toEqual({ requests: 3, inputTokens: 23, outputTokens: 6 });
      // Rows from before 0005 read no cached tokens; this release's carry theirs.
      const cached = await db
        .selectFrom("usage_ledger")
        .select(["response_id", "cached_tokens"])
        .orderBy("response_id")
        .execute();
      expect(cached).toEqual([
        { response_id: "resp_new_1", cached_tokens: 4 },
        { response_id: "resp_old_1", cached_tokens: 0 },
        { response_id: "resp_old_2", cached_tokens: 0 },
      ]);
    } finally {
      await db.destroy();
    }
  });
});

describe("several gateways starting together on the previous release's schema (real server)", () => {
  const postgres = engines.find((engine) => engine.name === "postgres")!;

  it("migrate it once, and all open", async () => {
    const target = await postgres.newTarget();
    const old = await connectStore(target);
    try {
      await migrateToLatest(old.db, providerOf(PREVIOUS));
      await writePreviousReleaseRows(old.db);
    } finally {
      await old.db.destroy();
    }
    // Three gateways opening the store at once, as three replicas of a new
    // release starting together do; each logs what it applied.
    const applied: string[][] = [];
    const logger = pino(
      { level: "info" },
      {
        write: (line: string) => {
          const entry = JSON.parse(line) as { msg: string; applied?: string[] };
          if (entry.msg === "store migrated") applied.push(entry.applied ?? []);
        },
      },
    );
    const stores = await Promise.all([1, 2, 3].map(() => openStore(target, { logger })));
    try {
      expect(applied.flat()).toEqual(ADDED);
      expect(applied.length).toBeLessThanOrEqual(1);
      const { rows } = await sql<{ name: string }>`
        SELECT name FROM kysely_migration ORDER BY name`.execute(stores[0]!.db);
      expect(rows.map((row) => row.name)).toEqual(ALL);
      for (const store of stores) expect(await readOldRows(store.db)).toEqual(OLD_ROWS);
    } finally {
      await Promise.all(stores.map((store) => store.close()));
    }
  });
});
