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

/** A batch's counts as countsOf reads them. */
const counts = (completed: number, failed: number, input = 0, cached = 0, output = 0) => ({
  completed,
  failed,
  inputTokens: input,
  cachedTokens: cached,
  outputTokens: output,
});

/** A completed line's result, as the worker writes it, with the usage its response reported. */
const result = (input: number, cached: number, output: number) =>
  JSON.stringify({
    response: {
      status_code: 200,
      body: {
        usage: {
          input_tokens: input,
          input_tokens_details: { cached_tokens: cached },
          output_tokens: output,
        },
      },
    },
  });

/**
 * request_counts are counters since 0006, and the usage beside them since
 * 0009: a batch that was running when the store was upgraded keeps the
 * counts and tokens its lines had, and its model, and counts written after
 * add to them, per writer.
 */
describe.each(engines)("batch counters on $name", (engine) => {
  it("0006 and 0009 count the lines and tokens a running batch already had, and later results add to them", async () => {
    const { db } = await connectStore(await engine.newTarget());
    try {
      const chosen = Object.fromEntries(BEFORE_COUNTS.map((name) => [name, MIGRATIONS[name]!]));
      await migrateToLatest(db, { getMigrations: () => Promise.resolve(chosen) });
      await sql`
        INSERT INTO batches (id, account, key_id, input_file_id, endpoint, completion_window,
          status, total, created_at, expires_at)
        VALUES ('batch_a', 'acme', 'k', 'file-a', '/v1/responses', '24h', 'in_progress', 5, now(), now() + interval '1 day'),
               ('batch_b', 'acme', 'k', 'file-b', '/v1/responses', '24h', 'in_progress', 1, now(), now() + interval '1 day'),
               ('batch_c', 'acme', 'k', 'file-c', '/v1/responses', '24h', 'in_progress', 2, now(), now() + interval '1 day')
      `.execute(db);
      await sql`
        INSERT INTO batch_lines (batch_id, line_no, custom_id, body, state, result)
        VALUES ('batch_a', 1, 'a1', '{"model":"m-a"}', 'completed', ${result(5, 2, 3)}),
               ('batch_a', 2, 'a2', '{"model":"m-a"}', 'completed', ${result(7, 0, 4)}),
               ('batch_a', 3, 'a3', '{"model":"m-a"}', 'failed', '{}'),
               ('batch_a', 4, 'a4', '{"model":"m-a"}', 'pending', NULL),
               ('batch_a', 5, 'a5', '{"model":"m-a"}', 'pending', NULL),
               ('batch_b', 1, 'b1', '{"model":"m-b"}', 'pending', NULL),
               ('batch_c', 1, 'c1', '{"model":"m-a"}', 'pending', NULL),
               ('batch_c', 2, 'c2', '{"model":"m-b"}', 'pending', NULL)
      `.execute(db);
      expect(await migrateToLatest(db)).toEqual(ALL.slice(BEFORE_COUNTS.length));
      const read = async () =>
        Object.fromEntries(await countsOf(db, ["batch_a", "batch_b", "batch_none"]));
      expect(await read()).toEqual({
        batch_a: counts(2, 1, 12, 2, 7),
        batch_b: counts(0, 0),
        batch_none: counts(0, 0),
      });
      expect(
        await db.selectFrom("batches").select(["id", "model"]).orderBy("id").execute(),
      ).toEqual([
        { id: "batch_a", model: "m-a" },
        { id: "batch_b", model: "m-b" },
        // Lines of two models: no one model to report.
        { id: "batch_c", model: null },
      ]);
      await addCounts(db, "worker-1", new Map([["batch_a", counts(1, 0, 10, 4, 6)]]));
      await addCounts(
        db,
        "worker-2",
        new Map([
          ["batch_a", counts(0, 1)],
          ["batch_b", counts(1, 0, 3, 0, 1)],
        ]),
      );
      await addCounts(db, "worker-1", new Map([["batch_b", counts(0, 0)]]));
      expect(await read()).toEqual({
        batch_a: counts(3, 2, 22, 6, 13),
        batch_b: counts(1, 0, 3, 0, 1),
        batch_none: counts(0, 0),
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
