import { sql } from "kysely";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { BatchWorker } from "../../../gateway/batch/batch-worker.js";
import { ModelRegistry } from "../../../gateway/registry/registry.js";
import { openStore } from "../../../gateway/store/store.js";
import type { Upstream } from "../../../gateway/upstream/forward.js";
import { onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "../store/engines.js";

const engines = useStoreEngines();

/**
 * Leases walk a batch from where the worker last leased; the lines behind
 * that point (a dead worker's expired leases) must still be found, oldest
 * batch first, and no line is leased to two workers at once.
 */
describe.each(engines)("batch leases on $name", (engine) => {
  it("takes the oldest batch's lines in order, and a dead worker's behind its own position", async () => {
    const store = await openStore(await engine.newTarget());
    onCleanup(() => store.close());
    const db = store.db;
    for (const [id, lines, age] of [
      ["batch_old", 30, "2 hours"],
      ["batch_new", 10, "1 hour"],
    ] as const) {
      await sql`
        INSERT INTO batches (id, account, key_id, input_file_id, endpoint, completion_window,
          status, total, created_at, expires_at)
        VALUES (${id}, 'acme', 'k', 'file-x', '/v1/responses', '24h', 'in_progress', ${lines},
          now() - ${age}::interval, now() + interval '1 day')
      `.execute(db);
      await sql`
        INSERT INTO batch_lines (batch_id, line_no, custom_id, body, state)
        SELECT ${id}, g, 'c' || g, '{}', 'pending' FROM generate_series(1, ${lines}) g
      `.execute(db);
    }
    let clock = Date.now();
    const worker = (id: string) =>
      new BatchWorker({
        store: () => Promise.resolve(db),
        registry: new ModelRegistry(),
        upstream: {} as Upstream,
        logger: pino({ level: "silent" }),
        concurrency: 4,
        leaseMs: 10_000,
        pollMs: 50,
        now: () => clock,
        workerId: id,
        bodyLimitBytes: 1024 * 1024,
      });
    const a = worker("worker-a");
    const b = worker("worker-b");
    const lines = (leased: Array<{ batch_id: string; line_no: number }>) =>
      leased.map((line) => `${line.batch_id.slice(6)}:${line.line_no}`);
    const range = (batch: string, from: number, to: number) =>
      Array.from({ length: to - from + 1 }, (_, n) => `${batch}:${from + n}`);

    expect(lines(await a.lease(db, 8))).toEqual(range("old", 1, 8));
    clock += 6_000;
    expect(lines(await b.lease(db, 8))).toEqual(range("old", 9, 16));
    expect(lines(await b.lease(db, 8))).toEqual(range("old", 17, 24));
    // worker-a dies; its leases expire. worker-b goes on past its own
    // position first, then into the next batch, then finds worker-a's lines.
    clock += 5_000;
    expect(lines(await b.lease(db, 6))).toEqual(range("old", 25, 30));
    const next = lines(await b.lease(db, 12));
    expect(next.sort()).toEqual([...range("old", 1, 8), ...range("new", 1, 4)].sort());
    expect(lines(await b.lease(db, 100))).toEqual(range("new", 5, 10));
    expect(await b.lease(db, 100)).toEqual([]);
    const owners = await db
      .selectFrom("batch_lines")
      .select(({ fn }) => ["lease_owner", fn.countAll<string>().as("n")])
      .groupBy("lease_owner")
      .execute();
    expect(owners.map((row) => [row.lease_owner, Number(row.n)])).toEqual([["worker-b", 40]]);
  });
});
