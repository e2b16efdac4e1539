import type { Kysely } from "kysely";
import { answerWithin, DEFAULT_READ_TIMEOUT_MS } from "./answer-within.js";
import type { Database } from "./database.js";
import {
  deleteStoredResponse,
  insertStoredResponses,
  loadConversation,
  loadStoredResponse,
  sweepStoredResponses,
  type StoredConversation,
  type StoredResponseRow,
} from "./stored-responses.js";

/**
 * Stored responses as the routes use them: the store's queries with the
 * retention and the clock applied. A row expires `retentionMs` after it was
 * made; reads treat an expired row as gone before the sweeper deletes it.
 */
export const DEFAULT_RETENTION_SECONDS = 30 * 24 * 3600;

export interface NewStoredResponse {
  id: string;
  owner: string;
  model: string;
  previousResponseId: string | null;
  inputItems: string;
  response: string;
  servedBy: string | null;
}

export interface ResponseStoreOptions {
  /** The migrated store's handle; may wait for it to open. */
  db: () => Promise<Kysely<Database>>;
  retentionSeconds: number;
  now: () => number;
  /** True while the database is known to be down: a save or read fails at once instead of waiting. */
  down?: () => boolean;
  /** A read found the database not answering: the store is down until it answers again. */
  unreachable?: (error: unknown) => void;
  /** The longest a save may hold an answer; default 2 s. */
  saveTimeoutMs?: number;
  /** The longest a read may wait before it is a 503; default 5 s. */
  readTimeoutMs?: number;
}

export const DEFAULT_SAVE_TIMEOUT_MS = 2000;

interface PendingSave {
  row: StoredResponseRow;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class ResponseStore {
  private sweeper: NodeJS.Timeout | undefined;
  /** Saves asked for in this turn of the event loop, written together at its end. */
  private pending: PendingSave[] = [];

  constructor(private readonly options: ResponseStoreOptions) {}

  get retentionSeconds(): number {
    return this.options.retentionSeconds;
  }

  private nowDate(): Date {
    return new Date(this.options.now());
  }

  /**
   * Stores one response. Rejects at once while the database is known to be
   * down, and after `saveTimeoutMs` when it does not answer (a server that
   * stopped answering would otherwise hold the answer for the query
   * timeout): the answer path then goes on without it. A write that timed
   * out may still land later.
   *
   * Saves asked for in the same turn of the event loop (the streams that end
   * in one decode step, whose terminal events arrive together) share one
   * multi-row INSERT, written once that turn's I/O is handled: on the
   * embedded PGlite a statement costs the event loop about 0.8 ms however
   * few rows it has, a row in it a small part of that. A lone save waits
   * for nothing but the end of its turn.
   */
  async save(entry: NewStoredResponse): Promise<void> {
    const now = this.options.now();
    return answerWithin(
      () =>
        new Promise<void>((resolve, reject) => {
          const row = {
            ...entry,
            createdAt: new Date(now),
            expiresAt: new Date(now + this.options.retentionSeconds * 1000),
          };
          if (this.pending.push({ row, resolve, reject }) === 1) setImmediate(() => this.flush());
        }),
      {
        down: this.options.down,
        unreachable: this.options.unreachable,
        timeoutMs: this.options.saveTimeoutMs ?? DEFAULT_SAVE_TIMEOUT_MS,
        undone: "response not stored",
      },
    );
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    void this.write(batch);
  }

  /**
   * One INSERT for the batch. When it fails and held more than one row, each
   * row is tried alone, so that one bad row (a duplicate id) never costs the
   * others their save.
   */
  private async write(batch: PendingSave[]): Promise<void> {
    let db: Kysely<Database>;
    try {
      db = await this.options.db();
    } catch (error) {
      for (const save of batch) save.reject(error);
      return;
    }
    const rows = batch.map((save) => save.row);
    try {
      await insertStoredResponses(db, rows);
    } catch (error) {
      if (batch.length === 1) return batch[0]!.reject(error);
      await Promise.all(
        batch.map((save) => insertStoredResponses(db, [save.row]).then(save.resolve, save.reject)),
      );
      return;
    }
    for (const save of batch) save.resolve();
  }

  async get(id: string, owner: string): Promise<StoredResponseRow | null> {
    return this.read((db) => loadStoredResponse(db, id, owner, this.nowDate()));
  }

  async delete(id: string, owner: string): Promise<boolean> {
    return this.read((db) => deleteStoredResponse(db, id, owner, this.nowDate()));
  }

  /**
   * The newest turns up to and including `id`, oldest first, as many as hold
   * `maxBytes` of stored text; null when `id` is not the owner's.
   */
  async conversation(
    id: string,
    owner: string,
    maxBytes: number,
  ): Promise<StoredConversation | null> {
    return this.read((db) => loadConversation(db, id, owner, this.nowDate(), maxBytes));
  }

  /**
   * A caller's read: refused at once while the database is known down, and
   * after `readTimeoutMs` when it does not answer, both a 503 with
   * Retry-After (app.ts). A hung server would otherwise hold every read for
   * the pool's connect or query timeout (10 and 30 s), and a client waiting
   * on it is one that cannot retry.
   */
  private async read<T>(query: (db: Kysely<Database>) => Promise<T>): Promise<T> {
    return answerWithin(() => this.options.db().then(query), {
      down: this.options.down,
      unreachable: this.options.unreachable,
      timeoutMs: this.options.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS,
      undone: "not read",
    });
  }

  /** Deletes the expired rows now; returns how many. */
  async sweep(): Promise<number> {
    return sweepStoredResponses(await this.options.db(), this.nowDate());
  }

  /**
   * Sweeps every `intervalMs` (each replica does; a DELETE of rows already
   * gone is harmless). The next sweep is timed from the end of the last one,
   * so a sweep slower than the interval (a large table, a loaded database)
   * never has a second one queued behind it. A failed sweep is reported and
   * tried at the next tick.
   */
  startSweeping(intervalMs: number, onError: (error: unknown) => void): void {
    this.stopSweeping();
    const schedule = () => {
      const timer = setTimeout(() => {
        this.sweep()
          .catch(onError)
          .finally(() => {
            if (this.sweeper === timer) schedule();
          });
      }, intervalMs);
      timer.unref();
      this.sweeper = timer;
    };
    schedule();
  }

  stopSweeping(): void {
    clearTimeout(this.sweeper);
    this.sweeper = undefined;
  }
}

/** How often to sweep: a tenth of the retention, between a second and an hour. */
export function sweepIntervalMs(retentionSeconds: number): number {
  return Math.min(3_600_000, Math.max(1000, (retentionSeconds * 1000) / 10));
}
