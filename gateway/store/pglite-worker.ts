import { Worker } from "node:worker_threads";
import type { PGlite, PGliteQueryOptions, PGliteQueryResults, PGliteTransaction } from "kysely";
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
 * SQLSTATE 08006 (connection_failure): a thread that stopped is, to its
 * callers, a database that went away; the store's callers (the outbox, the
 * API's 503) treat it as one (store-unreachable.ts).
 */
const THREAD_STOPPED = "08006";

const CLOSED: { message: string; code?: string } = { message: "the embedded store is closed" };
const THREAD_DIED = { message: "the embedded store's thread stopped", code: THREAD_STOPPED };

/** At most one new thread this often after the last one died. */
const RESTART_INTERVAL_MS = 1_000;

/** How long `close()` lets PGlite shut down cleanly before ending the thread anyway. */
const CLOSE_TIMEOUT_MS = 10_000;

type Distributive<T> = T extends unknown ? Omit<T, "id"> : never;
type Ask = Distributive<Request>;

/**
 * The embedded PGlite, run in a worker thread: the object Kysely's
 * `PGliteDialect` is given in its place. Statements no longer run on the
 * gateway's event loop (a ledger batch held it 2 to 40 ms, a stored
 * response's INSERT about 0.4 ms of each stream's; docs/state.md); what
 * remains there is posting a message and reading its reply.
 *
 * What crosses the boundary is a structured clone: parameters are copied
 * once (a view of a larger buffer is cut to its own bytes first), bytea
 * values read are handed over (transferred, not copied) and wrapped as
 * `Buffer` here again. Dates, numbers, JSON values and bigints arrive as
 * PGlite made them. Errors arrive as their message and own fields (`code`,
 * `constraint`…) and are rebuilt here, with the caller's stack.
 */
export class PGliteWorker implements PGlite {
  private nextId = 1;
  private readonly pending = new Map<number, (reply: Reply) => void>();
  /** Set while there is no thread to ask: it died, or the store was closed. */
  private stopped: { message: string; code?: string } | undefined;
  private closing: Promise<void> | undefined;
  /** A new thread being opened after the last one died. */
  private restarting: Promise<void> | undefined;
  private lastStart = 0;
  /** Counts the threads: a transaction belongs to the one that began it. */
  private generation = 0;
  closed = false;
  readonly ready = true;
  readonly waitReady = Promise.resolve();

  private constructor(
    private readonly options: ThreadOptions,
    private worker: Worker,
  ) {
    this.attach(worker);
  }

  /** Starts the thread and opens PGlite on `options.dataDir` in it. */
  static async open(options: ThreadOptions): Promise<PGliteWorker> {
    const worker = await startThread(options);
    const pglite = new PGliteWorker(options, worker);
    pglite.lastStart = Date.now();
    return pglite;
  }

  /** The thread, for tests that end it as a crash would. */
  get thread(): Worker {
    return this.worker;
  }

  private attach(worker: Worker): void {
    worker.on("message", (reply: Reply) => {
      const settle = this.pending.get(reply.id);
      if (!settle) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) worker.unref();
      settle(reply);
    });
    worker.on("error", (error: Error) => this.stop(worker, `it failed: ${error.message}`));
    worker.on("exit", (code) => this.stop(worker, `it exited with code ${code}`));
  }

  /**
   * After the thread died, a call starts a new one on the same folder (PGlite
   * recovers it as PostgreSQL does after a crash), at most once every
   * RESTART_INTERVAL_MS. Calls fail until it is open, as against a server
   * that is restarting; the outbox keeps its entries until then.
   */
  private restart(): void {
    if (this.restarting || this.closed || Date.now() - this.lastStart < RESTART_INTERVAL_MS) {
      return;
    }
    this.lastStart = Date.now();
    this.restarting = startThread(this.options)
      .then(async (worker) => {
        if (this.closed) {
          await worker.terminate();
          return;
        }
        this.worker = worker;
        this.generation++;
        this.attach(worker);
        this.stopped = undefined;
      })
      .catch(() => undefined)
      .finally(() => {
        this.restarting = undefined;
      });
  }

  async query<T>(
    sql: string,
    params: unknown[] = [],
    options?: PGliteQueryOptions,
  ): Promise<PGliteQueryResults<T>> {
    return (await this.runQuery(sql, params, options, undefined)) as PGliteQueryResults<T>;
  }

  async transaction<T>(callback: (tx: PGliteTransaction) => Promise<T>): Promise<T> {
    const txId = this.nextId++;
    const generation = this.generation;
    await this.call({ op: "begin" }, [], txId);
    let open = true;
    const tx: PGliteTransaction = {
      query: async <R>(sql: string, params: unknown[] = [], options?: PGliteQueryOptions) => {
        if (!open) throw new Error("Transaction is closed");
        // Its thread died since: the transaction died with it.
        if (generation !== this.generation) throw stoppedError(THREAD_DIED);
        return (await this.runQuery(sql, params, options, txId)) as PGliteQueryResults<R>;
      },
      rollback: async () => {
        if (!open) throw new Error("Transaction is closed");
        await this.call({ op: "rollback", tx: txId });
      },
    };
    let result: T;
    try {
      result = await callback(tx);
    } catch (error) {
      open = false;
      // The callback's error is the one to see; a failed ROLLBACK after it
      // (a stopped thread) would only hide it.
      await this.call({ op: "end", tx: txId, commit: false }).catch(() => undefined);
      throw error;
    }
    open = false;
    if (generation !== this.generation) throw stoppedError(THREAD_DIED);
    await this.call({ op: "end", tx: txId, commit: true });
    return result;
  }

  /**
   * Closes PGlite cleanly in its thread (it checkpoints and releases its
   * folder), then ends the thread. A thread that does not answer in time is
   * ended anyway: a gateway stopping must not hang on its store.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      await this.restarting;
      if (!this.stopped) {
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, CLOSE_TIMEOUT_MS);
        });
        try {
          await Promise.race([this.call({ op: "close" }).catch(() => undefined), timeout]);
        } finally {
          clearTimeout(timer);
        }
      }
      this.stopped ??= CLOSED;
      await this.worker.terminate();
    })();
    return this.closing;
  }

  private async runQuery(
    sql: string,
    params: unknown[],
    options: PGliteQueryOptions | undefined,
    tx: number | undefined,
  ): Promise<QueryResult> {
    const { rowMode, ...rest } = options ?? {};
    if (Object.values(rest).some((value) => value !== undefined)) {
      throw new Error(
        `the embedded store's thread takes only rowMode, not ${Object.keys(rest).join(", ")}`,
      );
    }
    const { values, transfer } = parametersToSend(params);
    const result = (await this.call({ op: "query", sql, params: values, rowMode, tx }, transfer))!;
    wrapBytea(result);
    return result;
  }

  /**
   * Sends one request and waits for its reply. The error is built here,
   * after the await, so that its stack runs through the caller's.
   */
  private async call(
    ask: Ask,
    transfer: ArrayBuffer[] = [],
    id = this.nextId++,
  ): Promise<QueryResult | undefined> {
    const reply = await this.send({ ...ask, id }, transfer);
    if (!reply.ok) throw rebuild(reply.error);
    return reply.result;
  }

  private send(request: Request, transfer: ArrayBuffer[]): Promise<Reply> {
    const refused = this.closed && request.op !== "close" ? CLOSED : this.stopped;
    if (refused) {
      if (refused !== CLOSED) this.restart();
      return Promise.reject(stoppedError(refused));
    }
    return new Promise<Reply>((resolve) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(request.id, resolve);
      this.worker.postMessage(request, transfer);
    });
  }

  /**
   * Fails every request in flight (also those a `close()` that timed out
   * left), and later ones until a new thread is open.
   */
  private stop(worker: Worker, reason: string): void {
    if (worker !== this.worker) return;
    const message = `the embedded store's thread stopped: ${reason}`;
    this.stopped ??= { message, code: THREAD_STOPPED };
    const error: RemoteError = { name: "Error", message, fields: { code: THREAD_STOPPED } };
    const settles = [...this.pending.values()];
    this.pending.clear();
    for (const settle of settles) settle({ id: 0, ok: false, error });
  }
}

/** Starts a thread and waits until PGlite is open in it. */
async function startThread(options: ThreadOptions): Promise<Worker> {
  const worker = new Worker(threadFile(), { workerData: options });
  // Only these listeners go afterwards: Worker keeps its port referenced
  // through listeners of its own (removeAllListeners would break it).
  let onMessage!: (opened: Opened) => void;
  let onError!: (error: Error) => void;
  let onExit!: (code: number) => void;
  const opened = await new Promise<Opened>((resolve, reject) => {
    onMessage = resolve;
    onError = reject;
    onExit = (code) =>
      reject(new Error(`the embedded store's thread exited with code ${code} while opening`));
    worker.on("message", onMessage).on("error", onError).on("exit", onExit);
  }).finally(() => {
    worker.off("message", onMessage).off("error", onError).off("exit", onExit);
  });
  if (!opened.opened) {
    await worker.terminate();
    throw rebuild(opened.error);
  }
  worker.unref();
  return worker;
}

function stoppedError(stopped: { message: string; code?: string }): Error {
  return Object.assign(new Error(stopped.message), stopped.code ? { code: stopped.code } : {});
}

/**
 * The thread's module beside this one: `.js` once compiled, `.ts` when this
 * file runs as TypeScript (tsx passes its loader to the thread through
 * `execArgv`; without it Node strips the types itself).
 */
function threadFile(): URL {
  const ext = import.meta.url.endsWith(".ts") ? "ts" : "js";
  return new URL(`./pglite-thread.${ext}`, import.meta.url);
}

/**
 * A structured clone copies a view's whole ArrayBuffer: a slice of a
 * larger buffer (Buffer's shared pool, a chunk cut from a read) is copied
 * to memory of its own first and that copy transferred, so each parameter
 * costs one copy of its own bytes either way.
 */
function parametersToSend(params: unknown[]): { values: unknown[]; transfer: ArrayBuffer[] } {
  const transfer: ArrayBuffer[] = [];
  const values = params.map((value) => {
    if (!(value instanceof Uint8Array)) return value;
    if (
      value.buffer instanceof ArrayBuffer &&
      value.byteOffset === 0 &&
      value.byteLength === value.buffer.byteLength
    ) {
      return value;
    }
    const own = new Uint8Array(value.byteLength);
    own.set(value);
    transfer.push(own.buffer);
    return own;
  });
  return { values, transfer };
}

/** bytea values arrive as plain Uint8Array: callers use Buffer's methods. */
function wrapBytea(result: QueryResult): void {
  result.fields.forEach((field, index) => {
    if (field.dataTypeID !== BYTEA_OID) return;
    const key = (row: unknown) => (Array.isArray(row) ? index : field.name);
    for (const row of result.rows as Record<string | number, unknown>[]) {
      const value = row[key(row)];
      if (value instanceof Uint8Array && !Buffer.isBuffer(value)) {
        row[key(row)] = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
      }
    }
  });
}

function rebuild(remote: RemoteError): Error {
  const error = new Error(remote.message);
  Object.assign(error, remote.fields);
  error.name = remote.name;
  return error;
}
