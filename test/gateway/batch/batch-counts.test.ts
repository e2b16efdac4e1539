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

/** A line's output id, as the worker minted them before 0009 (its ledger row's request_id). */
const lineId = (n: number) => `batch_req_${String(n).padStart(24, "0")}`;

/**
 * A completed line's result as the worker wrote it: the id first, an answer
 * that may hold anything (a NUL here, which PostgreSQL's json refuses), and
 * no usage in the body (a classification answer has none).
 */
const result = (n: number) =>
  JSON.stringify({
    id: lineId(n),
    custom_id: `c${n}`,
    response: { status_code: 200, request_id: lineId(n), body: { sports: 0.9, "\u0000": "x" } },
    error: null,
  });

/** The ledger row the worker wrote with that result: what was billed. */
const ledgerRow = (n: number, input: number, cached: number, output: number) => ({
  response_id: `resp_${n}`,
  route: "/v1/batches",
  account: "acme",
  model: "m-a",
  input_tokens: input,
  cached_tokens: cached,
  output_tokens: output,
  cost: "0",
  currency: "EUR",
  request_id: lineId(n),
  answered_at: new Date(),
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
          status, total, created_at, expires_at, metadata)
        VALUES ('batch_a', 'acme', 'k', 'file-a', '/v1/responses', '24h', 'in_progress', 5, now(), now() + interval '1 day', '{"job": "nightly"}'),
               ('batch_b', 'acme', 'k', 'file-b', '/v1/responses', '24h', 'in_progress', 1, now(), now() + interval '1 day', NULL),
               ('batch_c', 'acme', 'k', 'file-c', '/v1/responses', '24h', 'in_progress', 2, now(), now() + interval '1 day', NULL)
      `.execute(db);
      await sql`
        INSERT INTO batch_lines (batch_id, line_no, custom_id, body, state, result)
        VALUES ('batch_a', 1, 'a1', '{"model":"m-a","input":"a\\u0000"}', 'completed', ${result(1)}),
               ('batch_a', 2, 'a2', '{"model":"m-a"}', 'completed', ${result(2)}),
               ('batch_a', 3, 'a3', '{"model":"m-a"}', 'failed', '{}'),
               ('batch_a', 4, 'a4', '{"model":"m-a"}', 'pending', NULL),
               ('batch_a', 5, 'a5', '{"model":"m-a"}', 'pending', NULL),
               ('batch_b', 1, 'b1', '{"model":"m-b"}', 'pending', NULL),
               ('batch_c', 1, 'c1', '{"model":"m-a"}', 'pending', NULL),
               ('batch_c', 2, 'c2', '{"model":"m-b"}', 'pending', NULL)
      `.execute(db);
      for (const row of [ledgerRow(1, 5, 2, 3), ledgerRow(2, 7, 0, 4)]) {
        await sql`
          INSERT INTO usage_ledger (response_id, route, account, model, input_tokens,
            cached_tokens, output_tokens, cost, currency, request_id, answered_at)
          VALUES (${row.response_id}, ${row.route}, ${row.account}, ${row.model},
            ${row.input_tokens}, ${row.cached_tokens}, ${row.output_tokens}, ${row.cost},
            ${row.currency}, ${row.request_id}, ${row.answered_at})
        `.execute(db);
      }
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
      // jsonb metadata became JSON text (0011) that reads back the same.
      const kept = await db
        .selectFrom("batches")
        .select("metadata")
        .where("id", "=", "batch_a")
        .executeTakeFirstOrThrow();
      expect(JSON.parse(kept.metadata!)).toEqual({ job: "nightly" });
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
