import type { Kysely } from "kysely";
import { GatewayErrors } from "../errors.js";
import { answerWithin, DEFAULT_READ_TIMEOUT_MS, type StoreState } from "./answer-within.js";
import type { Database } from "./database.js";

/**
 * The store as the Files, Batch and usage routes reach it. Every call is refused
 * at once (503 `store_unavailable`) while the store is known down, and one
 * that finds it unreachable marks it down (answer-within.ts). What differs
 * is whether a call may be given up on:
 *
 * - `read`: one whose late landing changes nothing a caller relies on (a
 *   read; the rows of an upload still `uploading`, which no caller sees and
 *   which are discarded or swept). A 503 after the read deadline.
 * - `write`: one that may land after a 503 and so be done twice by the
 *   client's retry (a second batch run and billed, a second file) or be
 *   reported failed when it was not. It waits for its answer, bounded by
 *   the pool's own timeouts, as before.
 */
export interface StoreCalls {
  read<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
  write<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
  /**
   * A read that may take long on a live database (the usage endpoints'
   * aggregations over the ledger): refused at once while the store is known
   * down, but without the read deadline, which would answer a slow live
   * database with a 503 and mark the store down for every route.
   */
  slowRead<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
}

export interface StoreCallsOptions extends StoreState {
  /** The migrated store's handle; rejects while it cannot be opened. */
  db: () => Promise<Kysely<Database>>;
  /** The longest a read may wait before it is a 503; default 5 s. */
  readTimeoutMs?: number;
}

export function storeCalls(options: StoreCallsOptions): StoreCalls {
  const { db, readTimeoutMs = DEFAULT_READ_TIMEOUT_MS, ...state } = options;
  // A store that cannot be opened (not only one unreachable: a failed
  // migration too) is one to retry, not a 500.
  const opened = () =>
    db().catch((error: unknown) => {
      throw Object.assign(GatewayErrors.storeUnavailable(), { cause: error });
    });
  return {
    read: (work) =>
      answerWithin(() => opened().then(work), {
        ...state,
        timeoutMs: readTimeoutMs,
        undone: "not read",
      }),
    write: (work) => answerWithin(() => opened().then(work), { ...state, undone: "not written" }),
    slowRead: (work) => answerWithin(() => opened().then(work), { ...state, undone: "not read" }),
  };
}
