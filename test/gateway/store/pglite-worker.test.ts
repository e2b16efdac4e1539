/**
 * The embedded PGlite in its worker thread, through the object Kysely is
 * given in PGlite's place: real PGlite in a real thread, values and errors
 * as they cross the boundary, transactions held open across it, order
 * under concurrency, and a thread that closes or dies.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AbortedTransactionError, Kysely, PGliteDialect, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PGliteWorker } from "../../../gateway/store/pglite-worker.js";
import { isStoreUnreachable } from "../../../gateway/store/store-unreachable.js";
import { seedPgliteFolder } from "../../support/pglite-template.js";

const folders: string[] = [];

async function openWorker(): Promise<PGliteWorker> {
  const dir = await mkdtemp(join(tmpdir(), "modelgate-pglite-worker-"));
  folders.push(dir);
  const dataDir = join(dir, "data");
  await seedPgliteFolder(dataDir);
  return PGliteWorker.open({ dataDir, sharedBuffers: "16MB" });
}

afterAll(async () => {
  await Promise.all(folders.map((dir) => rm(dir, { recursive: true, force: true })));
});

describe("PGlite in a worker thread", () => {
  let pg: PGliteWorker;

  beforeAll(async () => {
    pg = await openWorker();
    await pg.query(
      `CREATE TABLE t (id int PRIMARY KEY, data bytea, n int8, doc jsonb, at timestamptz, note text)`,
    );
  });

  afterAll(async () => {
    await pg.close();
  });

  it("returns rows with bytea as Buffer, int8 as number, jsonb parsed and timestamptz as Date", async () => {
    const at = new Date("2026-11-26T12:34:56.789Z");
    const big = Buffer.alloc(3 * 1024 * 1024 + 7, 0);
    for (let i = 0; i < big.length; i += 4096) big[i] = i % 251;
    const small = Buffer.from("héllo, bytes\x00\xff");
    const inserted = await pg.query(
      `INSERT INTO t (id, data, n, doc, at, note) VALUES (1, $1, $2, $3, $4, $5), (2, $6, $7, $8, $9, NULL)`,
      [
        big,
        9_007_199_254_740_991,
        JSON.stringify({ a: [1, "x", null] }),
        at,
        "one",
        small,
        -3,
        "{}",
        at,
      ],
    );
    expect(inserted.affectedRows).toBe(2);

    const { rows, fields } = await pg.query<{
      id: number;
      data: Buffer;
      n: number;
      doc: unknown;
      at: Date;
      note: string | null;
      total: number;
    }>(`SELECT id, data, n, doc, at, note, sum(n) OVER () AS total FROM t ORDER BY id`);
    expect(fields.map((f) => f.name)).toEqual(["id", "data", "n", "doc", "at", "note", "total"]);
    expect(rows).toHaveLength(2);
    const [first, second] = rows as [(typeof rows)[0], (typeof rows)[0]];
    expect(Buffer.isBuffer(first.data)).toBe(true);
    expect(first.data.equals(big)).toBe(true);
    expect(Buffer.isBuffer(second.data)).toBe(true);
    expect(second.data.toString("latin1")).toBe(small.toString("latin1"));
    // Handed over, not a slice of something larger.
    expect(second.data.buffer.byteLength).toBe(small.length);
    expect(first.n).toBe(9_007_199_254_740_991);
    expect(second.n).toBe(-3);
    expect(typeof first.total).toBe("string"); // numeric: PGlite's own choice, as before
    expect(first.doc).toEqual({ a: [1, "x", null] });
    expect(second.doc).toEqual({});
    expect(first.at).toBeInstanceOf(Date);
    expect(first.at.toISOString()).toBe(at.toISOString());
    expect(second.note).toBeNull();
  });

  it("reads rows as arrays when asked, bytea included", async () => {
    const { rows } = await pg.query<unknown[]>(`SELECT id, data FROM t WHERE id = 2`, [], {
      rowMode: "array",
    });
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row[0]).toBe(2);
    expect(Buffer.isBuffer(row[1])).toBe(true);
  });

  it("sends a bytea parameter that is a view of a larger buffer as its own bytes only", async () => {
    const whole = Buffer.from("0123456789abcdef");
    const view = whole.subarray(4, 8);
    await pg.query(`INSERT INTO t (id, data) VALUES (3, $1)`, [view]);
    const { rows } = await pg.query<{ data: Buffer }>(`SELECT data FROM t WHERE id = 3`);
    expect(rows[0]!.data.toString()).toBe("4567");
    // The caller's buffer is untouched (copied, not transferred away).
    expect(whole.toString()).toBe("0123456789abcdef");
    expect(view.byteLength).toBe(4);
  });

  it("fails a unique violation with PostgreSQL's code, constraint and message, through the caller's stack", async () => {
    const error = await pg.query(`INSERT INTO t (id) VALUES (1)`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    const e = error as Error & Record<string, unknown>;
    expect(e.code).toBe("23505");
    expect(e.constraint).toBe("t_pkey");
    expect(e.table).toBe("t");
    expect(e.severity).toBe("ERROR");
    expect(e.detail).toBe("Key (id)=(1) already exists.");
    expect(e.message).toBe('duplicate key value violates unique constraint "t_pkey"');
    // pg-protocol's DatabaseError carries the protocol message's name as its
    // own field, as it did on the main thread.
    expect(e.name).toBe("error");
    expect(e.stack).toContain("pglite-worker.test.ts");
    // A syntax error is not mistaken for an unreachable store.
    expect(isStoreUnreachable(e)).toBe(false);
  });

  it("commits a transaction and rolls one back, holding it open across the thread", async () => {
    const kept = await pg.transaction(async (tx) => {
      await tx.query(`INSERT INTO t (id, note) VALUES (10, 'kept')`);
      const inside = await tx.query<{ c: number }>(
        `SELECT count(*)::int AS c FROM t WHERE id = 10`,
      );
      return inside.rows[0]!.c;
    });
    expect(kept).toBe(1);

    const failure = new Error("changed my mind");
    const thrown = await pg
      .transaction(async (tx) => {
        await tx.query(`INSERT INTO t (id, note) VALUES (11, 'dropped')`);
        throw failure;
      })
      .catch((e: unknown) => e);
    expect(thrown).toBe(failure);

    await pg.transaction(async (tx) => {
      await tx.query(`INSERT INTO t (id, note) VALUES (12, 'rolled back')`);
      await tx.rollback();
    });

    const { rows } = await pg.query<{ id: number }>(`SELECT id FROM t WHERE id >= 10 ORDER BY id`);
    expect(rows.map((r) => r.id)).toEqual([10]);
  });

  it("runs statements outside a transaction after it, as PGlite orders them", async () => {
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const inTx = pg.transaction(async (tx) => {
      await tx.query(`INSERT INTO t (id, note) VALUES (20, 'tx')`);
      order.push("tx insert");
      await held;
      order.push("tx end");
    });
    // Asked for while the transaction is open: it waits for the COMMIT.
    const outside = pg
      .query<{ note: string }>(`SELECT note FROM t WHERE id = 20`)
      .then((r) => order.push(`outside saw ${r.rows[0]?.note}`));
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    await Promise.all([inTx, outside]);
    expect(order).toEqual(["tx insert", "tx end", "outside saw tx"]);
  });

  it("keeps statements in the order they were asked for under concurrency", async () => {
    await pg.query(`CREATE TABLE seq (n serial PRIMARY KEY, k int)`);
    await Promise.all(
      Array.from({ length: 200 }, (_, k) => pg.query(`INSERT INTO seq (k) VALUES ($1)`, [k])),
    );
    const { rows } = await pg.query<{ k: number }>(`SELECT k FROM seq ORDER BY n`);
    expect(rows.map((r) => r.k)).toEqual(Array.from({ length: 200 }, (_, k) => k));
  });

  it("carries Kysely's transactions, including an aborted one (25P02)", async () => {
    const db = new Kysely<{ t: { id: number; note: string | null } }>({
      dialect: new PGliteDialect({ pglite: pg }),
    });
    await db.transaction().execute(async (trx) => {
      await trx.insertInto("t").values({ id: 30, note: "kysely" }).execute();
    });
    const error = await db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto("t").values({ id: 31, note: "dropped" }).execute();
        await trx.insertInto("t").values({ id: 30, note: "duplicate" }).execute();
      })
      .catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe("23505");
    expect((error as Error).stack).toContain("pglite-worker.test.ts");
    // A failed statement caught inside: PostgreSQL turns the COMMIT into a
    // ROLLBACK, PGlite says so with 25P02, Kysely makes it its own error.
    const aborted = await db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto("t").values({ id: 32, note: "dropped" }).execute();
        await trx
          .insertInto("t")
          .values({ id: 30, note: "duplicate" })
          .execute()
          .catch(() => undefined);
      })
      .catch((e: unknown) => e);
    expect(aborted).toBeInstanceOf(AbortedTransactionError);
    expect(((aborted as Error).cause as { code?: string }).code).toBe("25P02");
    const ids = await db.selectFrom("t").select("id").where("id", ">=", 30).orderBy("id").execute();
    expect(ids).toEqual([{ id: 30 }]);
    const rows = await sql<{ one: number }>`SELECT 1 AS one`.execute(db);
    expect(rows.rows).toEqual([{ one: 1 }]);
  });
});

describe("PGlite's thread ending", () => {
  it("closes cleanly, reopens the same folder, and fails a query after close clearly", async () => {
    const pg = await openWorker();
    await pg.query(`CREATE TABLE kept (v text)`);
    await pg.query(`INSERT INTO kept VALUES ('durable')`);
    await pg.close();
    expect(pg.closed).toBe(true);
    await expect(pg.query(`SELECT 1`)).rejects.toThrow("the embedded store is closed");
    await pg.close(); // twice is fine

    const dataDir = folders.at(-1)!;
    const again = await PGliteWorker.open({
      dataDir: join(dataDir, "data"),
      sharedBuffers: "16MB",
    });
    try {
      const { rows } = await again.query<{ v: string }>(`SELECT v FROM kept`);
      expect(rows).toEqual([{ v: "durable" }]);
    } finally {
      await again.close();
    }
  });

  it("fails the queries in flight when the thread dies, as an unreachable store, and every later one", async () => {
    const pg = await openWorker();
    await pg.query(`SELECT 1`);
    // A query that takes a while, so that it is surely in flight.
    const pending = pg.query(`SELECT pg_sleep(2)`).catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await pg.thread.terminate();
    const error = (await pending) as Error & { code?: string };
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toMatch(/the embedded store's thread stopped/);
    expect(error.code).toBe("08006");
    expect(isStoreUnreachable(error)).toBe(true);
    const later = (await pg.query(`SELECT 1`).catch((e: unknown) => e)) as Error & {
      code?: string;
    };
    expect(later.code).toBe("08006");
    await pg.close(); // does not hang
  });

  it("closes within its timeout even when a transaction left open holds PGlite", async () => {
    const pg = await openWorker();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let begun!: () => void;
    const inside = new Promise<void>((resolve) => (begun = resolve));
    const inTx = pg
      .transaction(async (tx) => {
        await tx.query(`SELECT 1`);
        begun();
        await held;
        await tx.query(`SELECT 1`);
      })
      .catch((e: unknown) => e);
    await inside;
    // Waits behind the transaction in PGlite: still in flight when close gives up.
    const waiting = pg.query(`SELECT 1`).catch((e: unknown) => e);
    const started = performance.now();
    await pg.close();
    const took = performance.now() - started;
    expect(took).toBeGreaterThan(9_000);
    expect(took).toBeLessThan(15_000);
    const failed = (await waiting) as Error & { code?: string };
    expect(failed).toBeInstanceOf(Error);
    expect(failed.message).toMatch(/the embedded store's thread stopped/);
    release();
    expect(await inTx).toBeInstanceOf(Error);
  }, 30_000);

  it("starts a new thread on the same folder after one died, as a server that comes back", async () => {
    const pg = await openWorker();
    try {
      await pg.query(`CREATE TABLE kept (v text)`);
      await pg.query(`INSERT INTO kept VALUES ('before the crash')`);
      const first = pg.thread;
      // A transaction open when its thread dies dies with it.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const inTx = pg
        .transaction(async (tx) => {
          await tx.query(`INSERT INTO kept VALUES ('in the dead transaction')`);
          await held;
          await tx.query(`SELECT 1`);
        })
        .catch((e: unknown) => e);
      await new Promise((resolve) => setTimeout(resolve, 50));
      await first.terminate();
      const failures: string[] = [];
      let rows: { v: string }[] | undefined;
      const deadline = Date.now() + 20_000;
      while (!rows && Date.now() < deadline) {
        try {
          rows = (await pg.query<{ v: string }>(`SELECT v FROM kept ORDER BY v`)).rows;
        } catch (error) {
          failures.push((error as { code?: string }).code ?? "none");
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
      expect(failures.length).toBeGreaterThan(0);
      expect(new Set(failures)).toEqual(new Set(["08006"]));
      expect(rows).toEqual([{ v: "before the crash" }]);
      expect(pg.thread).not.toBe(first);
      release();
      expect(((await inTx) as { code?: string }).code).toBe("08006");
    } finally {
      await pg.close();
    }
  });

  it("fails to open a folder that is not a database with PGlite's error", async () => {
    const dir = await mkdtemp(join(tmpdir(), "modelgate-pglite-worker-"));
    folders.push(dir);
    const { writeFile } = await import("node:fs/promises");
    await writeFile(join(dir, "file"), "not a folder");
    await expect(
      PGliteWorker.open({ dataDir: join(dir, "file"), sharedBuffers: "16MB" }),
    ).rejects.toThrow();
  });
});
