/**
 * The worker thread that owns the embedded PGlite (see pglite-worker.ts for
 * why it has a thread of its own). It opens the database from `workerData`,
 * then answers the main thread's requests in the order they arrive; PGlite
 * itself runs one statement at a time, as it did on the main thread.
 *
 * Nothing of the gateway is imported at run time (only types): Node starts
 * this file by itself, as compiled JavaScript or as TypeScript by type
 * stripping when no loader reaches the thread.
 */
import { parentPort, workerData } from "node:worker_threads";
import { PGlite, type Transaction } from "@electric-sql/pglite";
import type {
  Opened,
  QueryResult,
  RemoteError,
  Reply,
  Request,
  ThreadOptions,
} from "./pglite-protocol.js";

/** PostgreSQL type oid of bytea. */
const BYTEA_OID = 17;

/**
 * PGlite passes values as text; its own bytea codec builds one string per
 * byte (165 ms a MiB written and 81 ms read). Node's hex codec makes the
 * same text natively: 37 and 10 ms a MiB (docs/batch.md). A value read is
 * given a memory of its own (never a slice of Buffer's shared pool) so that
 * the reply can hand it to the main thread instead of copying it.
 */
const byteaCodec = {
  serializers: {
    [BYTEA_OID]: (value: Uint8Array) =>
      `\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex")}`,
  },
  parsers: {
    [BYTEA_OID]: (text: string) => {
      const bytes = Buffer.allocUnsafeSlow((text.length - 2) >>> 1);
      bytes.write(text.slice(2), "hex");
      return bytes;
    },
  },
};

/** Why the thread aborts a transaction the main thread rolled back. */
const ROLLED_BACK = new Error("rolled back by the caller");

interface OpenTransaction {
  tx?: Transaction;
  decide?: (commit: boolean) => void;
  /** Settles once COMMIT or ROLLBACK has run. */
  done: Promise<unknown>;
}

const port = parentPort!;
const options = workerData as ThreadOptions;
const transactions = new Map<number, OpenTransaction>();

function describeError(error: unknown): RemoteError {
  if (!(error instanceof Error)) return { name: "Error", message: String(error), fields: {} };
  const fields: RemoteError["fields"] = {};
  for (const [key, value] of Object.entries(error)) {
    // `params` may hold megabytes of bytea and `queryOptions` functions:
    // only the fields a caller reads (code, detail, constraint…) cross.
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      fields[key] = value;
    }
  }
  return { name: error.name, message: error.message, fields };
}

function fail(id: number, error: unknown): void {
  port.postMessage({ id, ok: false, error: describeError(error) } satisfies Reply);
}

function succeed(id: number): void {
  port.postMessage({ id, ok: true } satisfies Reply);
}

/** The open transaction `txId`; a request naming another fails. */
function transactionFor(id: number, txId: number): Transaction | null {
  const tx = transactions.get(txId)?.tx;
  if (!tx) fail(id, new Error(`no open transaction ${txId}`));
  return tx ?? null;
}

/** Hands the rows' bytea memory over to the main thread rather than copying it. */
function sendResult(id: number, result: QueryResult): void {
  const transfer = new Set<ArrayBuffer>();
  result.fields.forEach((field, index) => {
    if (field.dataTypeID !== BYTEA_OID) return;
    for (const row of result.rows) {
      const value: unknown = Array.isArray(row)
        ? (row as unknown[])[index]
        : (row as Record<string, unknown>)[field.name];
      if (value instanceof Uint8Array && value.buffer instanceof ArrayBuffer) {
        transfer.add(value.buffer);
      }
    }
  });
  const reply: Reply = {
    id,
    ok: true,
    result: { rows: result.rows, fields: result.fields, affectedRows: result.affectedRows },
  };
  port.postMessage(reply, [...transfer]);
}

function begin(pglite: PGlite, id: number): void {
  const open: OpenTransaction = { done: Promise.resolve() };
  let begun = false;
  open.done = pglite.transaction(async (tx) => {
    const decided = new Promise<void>((resolve, reject) => {
      open.decide = (commit) => (commit ? resolve() : reject(ROLLED_BACK));
    });
    open.tx = tx;
    transactions.set(id, open);
    begun = true;
    succeed(id);
    await decided;
  });
  // BEGIN itself failed: the callback never ran and nothing is open.
  open.done.catch((error: unknown) => {
    if (!begun) fail(id, error);
  });
}

function end(id: number, txId: number, commit: boolean): void {
  const open = transactions.get(txId);
  if (!open?.decide) {
    fail(id, new Error(`no open transaction ${txId}`));
    return;
  }
  transactions.delete(txId);
  open.decide(commit);
  open.done.then(
    () => succeed(id),
    (error: unknown) => {
      // A rollback the caller asked for is its success.
      if (!commit && error === ROLLED_BACK) succeed(id);
      else fail(id, error);
    },
  );
}

function handle(pglite: PGlite, request: Request): void {
  switch (request.op) {
    case "query": {
      const target = request.tx === undefined ? pglite : transactionFor(request.id, request.tx);
      if (!target) return;
      const rowMode = request.rowMode;
      target.query(request.sql, request.params, rowMode ? { rowMode } : undefined).then(
        (result) => sendResult(request.id, result as QueryResult),
        (error: unknown) => fail(request.id, error),
      );
      return;
    }
    case "begin":
      begin(pglite, request.id);
      return;
    case "end":
      end(request.id, request.tx, request.commit);
      return;
    case "rollback": {
      const tx = transactionFor(request.id, request.tx);
      if (!tx) return;
      tx.rollback().then(
        () => succeed(request.id),
        (error: unknown) => fail(request.id, error),
      );
      return;
    }
    case "close":
      // A clean shutdown (a checkpoint, the folder closed); the main thread
      // ends the thread once this is answered.
      pglite.close().then(
        () => succeed(request.id),
        (error: unknown) => fail(request.id, error),
      );
      return;
  }
}

PGlite.create(options.dataDir, {
  // connect.ts says why so small.
  postgresqlconf: [`shared_buffers=${options.sharedBuffers}`],
  ...byteaCodec,
}).then(
  (pglite) => {
    port.on("message", (request: Request) => handle(pglite, request));
    port.postMessage({ opened: true } satisfies Opened);
  },
  (error: unknown) =>
    port.postMessage({ opened: false, error: describeError(error) } satisfies Opened),
);
