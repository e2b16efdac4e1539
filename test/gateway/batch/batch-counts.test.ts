import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { addCounts, countsOf } from "../../../gateway/batch/batch-store.js";
import { connectStore } from "../../../gateway/store/connect.js";
import { migrateToLatest } from "../../../gateway/store/migrate.js";
import { MIGRATIONS } from "../../../gateway/store/migrations/index.js";
import { useStoreEngines } from "../store/engines.js";

const engines = useStoreEngines();
const ALL = Object.keys(MIGRATIONS);
const BEFORE_COUNTS = ALL.slice(0, ALL.indexOf("0006-batch-counts"));

/**
 * request_counts are counters since 0006: a batch that was running when the
 * store was upgraded keeps the counts its lines had, and counts written
 * after add to them, per writer.
 */
describe.each(engines)("batch counters on $name", (engine) => {
  it("0006 counts the lines a running batch already had, and later results add to them", async () => {
    const { db } = await connectStore(await engine.newTarget());
    try {
      const chosen = Object.fromEntries(BEFORE_COUNTS.map((name) => [name, MIGRATIONS[name]!]));
      await migrateToLatest(db, { getMigrations: () => Promise.resolve(chosen) });
      await sql`
        INSERT INTO batches (id, account, key_id, input_file_id, endpoint, completion_window,
          status, total, created_at, expires_at)
        VALUES ('batch_a', 'acme', 'k', 'file-a', '/v1/responses', '24h', 'in_progress', 5, now(), now() + interval '1 day'),
               ('batch_b', 'acme', 'k', 'file-b', '/v1/responses', '24h', 'in_progress', 1, now(), now() + interval '1 day')
      `.execute(db);
      await sql`
        INSERT INTO batch_lines (batch_id, line_no, custom_id, body, state, result)
        VALUES ('batch_a', 1, 'a1', '{}', 'completed', '{}'), ('batch_a', 2, 'a2', '{}', 'completed', '{}'),
               ('batch_a', 3, 'a3', '{}', 'failed', '{}'), ('batch_a', 4, 'a4', '{}', 'pending', NULL),
               ('batch_a', 5, 'a5', '{}', 'pending', NULL), ('batch_b', 1, 'b1', '{}', 'pending', NULL)
      `.execute(db);
      expect(await migrateToLatest(db)).toEqual(ALL.slice(BEFORE_COUNTS.length));
      const read = async () =>
        Object.fromEntries(await countsOf(db, ["batch_a", "batch_b", "batch_none"]));
      expect(await read()).toEqual({
        batch_a: { completed: 2, failed: 1 },
        batch_b: { completed: 0, failed: 0 },
        batch_none: { completed: 0, failed: 0 },
      });
      await addCounts(db, "worker-1", new Map([["batch_a", { completed: 1, failed: 0 }]]));
      await addCounts(
        db,
        "worker-2",
        new Map([
          ["batch_a", { completed: 0, failed: 1 }],
          ["batch_b", { completed: 1, failed: 0 }],
        ]),
      );
      await addCounts(db, "worker-1", new Map([["batch_b", { completed: 0, failed: 0 }]]));
      expect(await read()).toEqual({
        batch_a: { completed: 3, failed: 2 },
        batch_b: { completed: 1, failed: 0 },
        batch_none: { completed: 0, failed: 0 },
      });
      // A deleted batch takes its counters with it.
      await db.deleteFrom("batches").where("id", "=", "batch_a").execute();
      expect(
        await db
          .selectFrom("batch_counts")
          .select("slot")
          .where("batch_id", "=", "batch_a")
          .execute(),
      ).toEqual([]);
    } finally {
      await db.destroy();
    }
  });
});
