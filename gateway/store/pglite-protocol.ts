/**
 * The messages between the gateway's main thread (pglite-worker.ts) and the
 * thread that runs PGlite (pglite-thread.ts). Types only: the thread imports
 * nothing of the gateway at run time, so that Node can start its `.ts` file
 * on its own (type stripping) wherever tsx's loader does not reach it.
 */

/** What the thread needs to open the database, as `workerData`. */
export interface ThreadOptions {
  dataDir: string;
  /** PostgreSQL's `shared_buffers`, e.g. "16MB". */
  sharedBuffers: string;
}

export type RowMode = "array" | "object";

/**
 * Every request carries an `id` that its reply repeats. A transaction is
 * named by the id of the `begin` that opened it.
 */
export type Request =
  | { op: "query"; id: number; sql: string; params: unknown[]; rowMode?: RowMode; tx?: number }
  | { op: "begin"; id: number }
  /** Ends a transaction: COMMIT, or ROLLBACK when `commit` is false. */
  | { op: "end"; id: number; tx: number; commit: boolean }
  /** `tx.rollback()` inside the transaction's callback. */
  | { op: "rollback"; id: number; tx: number }
  | { op: "close"; id: number };

/** An error as it crosses: its own primitive fields (`code`, `detail`, `constraint`…). */
export interface RemoteError {
  name: string;
  message: string;
  fields: Record<string, string | number | boolean>;
}

export interface QueryResult {
  rows: unknown[];
  fields: { name: string; dataTypeID: number }[];
  affectedRows?: number;
}

export type Reply =
  { id: number; ok: true; result?: QueryResult } | { id: number; ok: false; error: RemoteError };

/** Sent once PGlite is open (or failed to open), before any reply. */
export type Opened = { opened: true } | { opened: false; error: RemoteError };
