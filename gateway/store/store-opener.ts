import { sql, type Kysely } from "kysely";
import { errorText } from "../../lib/error-text.js";
import type { Logger } from "../../lib/logger.js";
import type { StoreTarget } from "./connect.js";
import type { Database } from "./database.js";
import { describeTarget, openStore, type Store } from "./store.js";

const RECHECK_INTERVAL_MS = 1_000;

/**
 * The store as the gateway holds it: opened (connected and migrated) in the
 * background, so that the gateway serves while the database is down or
 * still starting. Nothing on the answer path waits for it: usage is
 * journaled first and shipped to the ledger when the store answers. A
 * failed open is tried again on the next use, which the outbox paces with
 * its backoff.
 */
export class StoreOpener {
  private opening: Promise<Store> | undefined;
  private closed = false;
  /** Whether the last open or ledger write reached the database. */
  reachable = false;
  /** Whether an open has settled (succeeded or failed) at least once. */
  private settled = false;
  private readonly logger: Logger;
  private probing = false;
  private lastProbe = 0;

  constructor(
    readonly target: StoreTarget,
    options: { logger: Logger },
  ) {
    this.logger = options.logger;
  }

  /** Starts opening without waiting; a failure is logged and retried on the next use. */
  start(): void {
    this.db().catch(() => undefined);
  }

  /** The migrated store's handle; rejects while the store cannot be opened. */
  db(): Promise<Kysely<Database>> {
    return this.store().then((store) => store.db);
  }

  store(): Promise<Store> {
    if (this.closed) return Promise.reject(new Error("store closed"));
    this.opening ??= openStore(this.target, { logger: this.logger }).then(
      (store) => {
        this.settled = true;
        this.reachable = true;
        this.logger.info(
          { store: describeTarget(this.target), engine: store.engine },
          "store open",
        );
        return store;
      },
      (error: unknown) => {
        this.settled = true;
        this.opening = undefined;
        this.reachable = false;
        this.logger.warn(
          { store: describeTarget(this.target), err: errorText(error) },
          "store unavailable: usage waits in the local journal",
        );
        throw error;
      },
    );
    return this.opening;
  }

  /**
   * While the store is known to be down, asks the database in the
   * background, at most once a second, whether it answers again. Only the
   * ledger's writes and a new open set `reachable`, and after a failed write
   * the open store is kept, so without this the answer path kept skipping
   * stored responses after the database was back until the outbox's next
   * delivery, whose backoff grows to a minute.
   */
  recheck(now: number = Date.now()): void {
    if (!this.down || this.probing || now - this.lastProbe < RECHECK_INTERVAL_MS) return;
    this.lastProbe = now;
    this.probing = true;
    this.store()
      .then((store) => sql`SELECT 1`.execute(store.db))
      .then(
        () => {
          this.reachable = true;
        },
        () => undefined,
      )
      .finally(() => {
        this.probing = false;
      });
  }

  /**
   * True once the database is known to be unreachable (an open failed, or a
   * write since): what the answer path reads to skip a write instead of
   * waiting out a timeout. False while the first open is still under way.
   */
  get down(): boolean {
    return this.settled && !this.reachable;
  }

  async close(): Promise<void> {
    this.closed = true;
    const store = await this.opening?.catch(() => undefined);
    await store?.close();
  }
}
