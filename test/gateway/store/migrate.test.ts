import { sql, type Kysely } from "kysely";
import { describe, expect, it } from "vitest";
import { connectStore } from "../../../gateway/store/connect.js";
import type { Database } from "../../../gateway/store/database.js";
import { migrateToLatest, migrationProvider } from "../../../gateway/store/migrate.js";
import { MIGRATIONS } from "../../../gateway/store/migrations/index.js";
import { openStore } from "../../../gateway/store/store.js";
import { useStoreEngines } from "./engines.js";

const engines = useStoreEngines();
const ALL = Object.keys(MIGRATIONS);

async function tables(db: Kysely<Database>): Promise<string[]> {
  const { rows } = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables
    WHERE table_schema = 'public' ORDER BY table_name`.execute(db);
  return rows.map((row) => row.table_name);
}

describe.each(engines)("store migrations on $name", (engine) => {
  it("creates the schema from an empty database", async () => {
    const target = await engine.newTarget();
    const { db } = await connectStore(target);
    try {
      expect(await tables(db)).toEqual([]);
      expect(await migrateToLatest(db)).toEqual(ALL);
      expect(await tables(db)).toContain("usage_ledger");
    } finally {
      await db.destroy();
    }
  });

  it("applies nothing the second time and keeps the data", async () => {
    const target = await engine.newTarget();
    const first = await openStore(target);
    await first.db
      .insertInto("usage_ledger")
      .values({
        response_id: "resp_kept",
        route: "/v1/responses",
        account: "acme",
        project: null,
        key_id: null,
        agent_id: null,
        model: "tiny",
        input_tokens: 1,
        output_tokens: 2,
        cost: "0",
        currency: "USD",
        request_id: "req-1",
        answered_at: new Date(),
      })
      .execute();
    // Again on the same connection, then as a restarted gateway would.
    expect(await migrateToLatest(first.db)).toEqual([]);
    await first.close();
    const second = await connectStore(target);
    try {
      expect(await migrateToLatest(second.db)).toEqual([]);
      const rows = await second.db.selectFrom("usage_ledger").select("response_id").execute();
      expect(rows).toEqual([{ response_id: "resp_kept" }]);
    } finally {
      await second.db.destroy();
    }
  });

  it("leaves the schema as it was when a migration fails, and names it", async () => {
    const target = await engine.newTarget();
    const { db } = await connectStore(target);
    try {
      const broken = {
        getMigrations: async () => ({
          ...(await migrationProvider.getMigrations()),
          "9999-broken": {
            up: async (trx: Kysely<unknown>) => {
              await sql`SELECT * FROM no_such_table`.execute(trx);
            },
          },
        }),
      };
      await expect(migrateToLatest(db, broken)).rejects.toThrow(/9999-broken.*no_such_table/);
      // One transaction for the run: the good migration before it is undone too.
      expect(await tables(db)).not.toContain("usage_ledger");
      expect(await migrateToLatest(db)).toEqual(ALL);
    } finally {
      await db.destroy();
    }
  });
});

describe.each(engines)("store migrations from the previous release's schema on $name", (engine) => {
  it("0002 keeps the rows, and the exporter's cursor starts after them", async () => {
    const target = await engine.newTarget();
    const { db } = await connectStore(target);
    try {
      const previous = {
        getMigrations: () =>
          Promise.resolve({ "0001-usage-ledger": MIGRATIONS["0001-usage-ledger"]! }),
      };
      expect(await migrateToLatest(db, previous)).toEqual(["0001-usage-ledger"]);
      const row = (id: string) => ({
        response_id: id,
        route: "/v1/responses" as const,
        account: "acme",
        project: null,
        key_id: null,
        agent_id: null,
        model: "tiny",
        input_tokens: 1,
        output_tokens: 2,
        cost: "0",
        currency: "USD",
        request_id: "req-1",
        answered_at: new Date(),
      });
      await db
        .insertInto("usage_ledger")
        .values([row("resp_old1"), row("resp_old2")])
        .execute();
      expect(await migrateToLatest(db)).toEqual(ALL.slice(1));
      await db.insertInto("usage_ledger").values(row("resp_new")).execute();
      // Rows after the cursor, in export order: only the one written after the upgrade.
      const { rows } = await sql<{ response_id: string }>`
        SELECT l.response_id FROM usage_ledger l, usage_export_cursor c
        WHERE c.name = 'http-sink' AND (l.txid, l.seq) > (c.txid, c.seq)`.execute(db);
      expect(rows).toEqual([{ response_id: "resp_new" }]);
      expect(await db.selectFrom("usage_ledger").select("response_id").execute()).toHaveLength(3);
    } finally {
      await db.destroy();
    }
  });
});

describe("store migrations on a real server, several replicas starting together", () => {
  const postgres = engines.find((engine) => engine.name === "postgres")!;

  it("3 concurrent migrators: one applies, all succeed", async () => {
    const target = await postgres.newTarget();
    const connections = await Promise.all([1, 2, 3].map(() => connectStore(target)));
    try {
      const applied = await Promise.all(connections.map(({ db }) => migrateToLatest(db)));
      expect(applied.flat()).toEqual(ALL);
      expect(applied.filter((names) => names.length > 0)).toHaveLength(1);
      const { rows } = await sql<{ name: string }>`
        SELECT name FROM kysely_migration ORDER BY name`.execute(connections[0]!.db);
      expect(rows.map((row) => row.name)).toEqual(ALL);
    } finally {
      await Promise.all(connections.map(({ db }) => db.destroy()));
    }
  });
});
