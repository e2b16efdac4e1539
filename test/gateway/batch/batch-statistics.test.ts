import { sql } from "kysely";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { BatchWorker } from "../../../gateway/batch/batch-worker.js";
import { openStore } from "../../../gateway/store/store.js";
import type { Upstream } from "../../../gateway/upstream/forward.js";
import { onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "../store/engines.js";
import { storedBatch, useTinyModel } from "./stored-batch.js";
import type { InputLine } from "./support.js";

const engines = useStoreEngines();
const owner = { account: "acme", project: null };

const registry = useTinyModel();

/**
 * With no statistics for a new batch's id the planner takes the batch for one
 * row, and a lease's UPDATE joined every line of the batch to each leased one:
 * 1 s a lease on PostgreSQL at 50,000 lines, until autovacuum's ANALYZE came
 * (in a large table, never). Validation analyzes the lines it wrote.
 */
describe.each(engines)("batch line statistics on $name", (engine) => {
  it("a validated batch's lines are known to the planner before any lease", async () => {
    const store = await openStore(await engine.newTarget());
    onCleanup(() => store.close());
    const db = store.db;
    // An earlier batch's lines, analyzed: statistics that predate the new batch.
    await sql`
      INSERT INTO batches (id, account, key_id, input_file_id, endpoint, completion_window,
        status, total, created_at, expires_at)
      VALUES ('batch_old', 'acme', 'k', 'file-x', '/v1/responses', '24h', 'completed', 20000,
        now() - interval '1 hour', now() + interval '1 day')
    `.execute(db);
    await sql`
      INSERT INTO batch_lines (batch_id, line_no, custom_id, body, state, result)
      SELECT 'batch_old', g, 'c' || g, '{}', 'completed', '{}' FROM generate_series(1, 20000) g
    `.execute(db);
    await sql`ANALYZE batch_lines`.execute(db);

    const count = 3000;
    const lines: InputLine[] = Array.from({ length: count }, (_, n) => ({
      custom_id: `r${n}`,
      method: "POST",
      url: "/v1/responses",
      body: { model: "tiny", input: `request ${n}` },
    }));
    const batch = await storedBatch(db, owner, lines);
    const worker = new BatchWorker({
      store: () => Promise.resolve(db),
      registry,
      upstream: {} as Upstream,
      logger: pino({ level: "silent" }),
      concurrency: 4,
      leaseMs: 10_000,
      pollMs: 50,
      bodyLimitBytes: 1024 * 1024,
    });
    expect(await worker.validateNext(db)).toBe(true);
    const status = await db
      .selectFrom("batches")
      .select(["status", "total"])
      .where("id", "=", batch.id)
      .executeTakeFirstOrThrow();
    expect(status).toEqual({ status: "in_progress", total: count });

    const plan = await sql<{ "QUERY PLAN": unknown }>`
      EXPLAIN (FORMAT JSON) SELECT line_no FROM batch_lines WHERE batch_id = ${batch.id}
    `.execute(db);
    const raw = plan.rows[0]!["QUERY PLAN"];
    const parsed = (typeof raw === "string" ? JSON.parse(raw) : raw) as Array<{
      Plan: { "Plan Rows": number };
    }>;
    // The planner's estimate of the batch's lines: a sample, so near, not exact.
    expect(parsed[0]!.Plan["Plan Rows"]).toBeGreaterThan(count / 2);
  });
});
