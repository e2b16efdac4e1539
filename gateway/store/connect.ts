import { mkdir } from "node:fs/promises";
import { Kysely, PGliteDialect, PostgresDialect } from "kysely";
import pg from "pg";
import type { Database } from "./database.js";
import { PGliteWorker } from "./pglite-worker.js";

/**
 * Where the store lives: a PostgreSQL server (`postgres://…`), or the
 * embedded default, PGlite (PostgreSQL compiled to WASM, in this process,
 * on a worker thread of its own) on a folder. Both run the same migrations
 * and the same queries.
 */
export type StoreTarget = { url: string } | { dataDir: string };

export type StoreEngine = "postgres" | "pglite";

export interface StoreConnection {
  db: Kysely<Database>;
  engine: StoreEngine;
}

export interface ConnectOptions {
  /** Connections in the server pool; default 10. PGlite has one. */
  maxConnections?: number;
}

/**
 * PostgreSQL's default 128 MB of shared buffers would be most of the
 * gateway pod's memory, on top of the WebAssembly heap; an append-mostly
 * ledger needs far less (see docs/state.md).
 */
const PGLITE_SHARED_BUFFERS = "16MB";

/** PostgreSQL type oid of int8 (bigint), which `count(*)` and `sum(integer)` return. */
const INT8_OID = 20;
const int8AsNumber = new pg.TypeOverrides();
int8AsNumber.setTypeParser(INT8_OID, (value: string) => Number(value));

/**
 * Opens a connection (pool) to the target without touching the schema; see
 * `openStore` for the migrated store. Nothing is connected until the first
 * query, so a server that is down fails that query, not this call.
 */
export async function connectStore(
  target: StoreTarget,
  options: ConnectOptions = {},
): Promise<StoreConnection> {
  if ("url" in target) {
    const pool = new pg.Pool({
      connectionString: target.url,
      max: options.maxConnections ?? 10,
      // A server that drops packets must fail a send, not hold it (and the
      // gateway's shutdown) forever: the outbox retries it later.
      connectionTimeoutMillis: 10_000,
      query_timeout: 30_000,
      // PGlite reads int8 as a number and pg as a string: the same query must
      // give the same value on both, and token sums stay far below 2^53.
      types: int8AsNumber,
    });
    // A client whose server went away emits an error; without a listener
    // that would end the process. The pool listens only while a client is
    // idle (its "error" event): a server stopped mid-query also kills the
    // clients checked out at that moment, whose query fails on its own and
    // whose client the pool drops on release. The next query reconnects.
    pool.on("error", () => undefined);
    pool.on("connect", (client) => client.on("error", () => undefined));
    return {
      db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }),
      engine: "postgres",
    };
  }
  await mkdir(target.dataDir, { recursive: true });
  // In a worker thread of its own: PGlite runs each statement synchronously,
  // which on the gateway's event loop held every stream behind it
  // (pglite-worker.ts, docs/state.md).
  const pglite = await PGliteWorker.open({
    dataDir: target.dataDir,
    sharedBuffers: PGLITE_SHARED_BUFFERS,
  });
  return { db: new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) }), engine: "pglite" };
}
