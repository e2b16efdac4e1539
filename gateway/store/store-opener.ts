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
  /** Whether the last open, write or probe reached the database. */
  private answering = false;
  /** Whether an open has settled (succeeded or failed) at least once. */
  private settled = false;
  private readonly logger: Logger;
  private probing = false;
  private lastProbe = 0;
  /** Asks once a second while the store is down, so that it comes back without traffic. */
  private prober: NodeJS.Timeout | undefined;

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
        this.answering = true;
        this.stopProbing();
        this.logger.info(
          { store: describeTarget(this.target), engine: store.engine },
          "store open",
        );
        return store;
      },
      (error: unknown) => {
        // Once per outage: traffic and the outbox retry a failed open, each
        // attempt would otherwise log it again.
        const news = !this.settled || this.answering;
        this.settled = true;
        this.opening = undefined;
        this.answering = false;
        if (news) {
          this.logger.warn(
            { store: describeTarget(this.target), err: errorText(error) },
            "store unavailable: usage waits in the local journal",
          );
        }
        throw error;
      },
    );
    return this.opening;
  }

  /** Whether the last open, write or probe reached the database (the `store_up` gauge). */
  get reachable(): boolean {
    return this.answering;
  }

  /** A write or read reached the database. */
  markReachable(): void {
    if (this.answering) return;
    this.answering = true;
    this.stopProbing();
    if (this.settled) {
      this.logger.info({ store: describeTarget(this.target) }, "store is back");
    }
  }

  /**
   * A write or read found the database unreachable or not answering: the
   * answer path now skips what it would wait for, and a probe asks once a
   * second whether it is back. Logged once per outage, not per request.
   */
  markUnreachable(error: unknown): void {
    // Before the first open settles, its outcome decides: a slow first start
    // (PGlite's is seconds of CPU) is not an outage.
    if (!this.settled || !this.answering) return;
    this.answering = false;
    this.logger.warn(
      { store: describeTarget(this.target), err: errorText(error) },
      "store unreachable: stored responses, files and batches are refused until it answers",
    );
    this.probeWhileDown();
  }

  /**
   * While the store is known to be down, asks the database in the
   * background, at most once a second, whether it answers again. Without
   * it, after a failed write the answer path kept skipping stored responses
   * until the outbox's next delivery, whose backoff grows to a minute. The
   * answer path asks too (`recheck`), so a probe is due as soon as traffic
   * comes, and a timer asks without traffic, so `store_up` tells the truth.
   */
  recheck(now: number = Date.now()): void {
    if (!this.down || this.probing || now - this.lastProbe < RECHECK_INTERVAL_MS) return;
    this.lastProbe = now;
    this.probing = true;
    this.store()
      .then((store) => sql`SELECT 1`.execute(store.db))
      .then(
        () => this.markReachable(),
        () => undefined,
      )
      .finally(() => {
        this.probing = false;
      });
  }

  private probeWhileDown(): void {
    if (this.prober !== undefined || this.closed) return;
    this.prober = setInterval(() => this.recheck(), RECHECK_INTERVAL_MS);
    this.prober.unref();
  }

  private stopProbing(): void {
    clearInterval(this.prober);
    this.prober = undefined;
  }

  /**
   * True once the database is known to be unreachable (an open failed, or a
   * write or read since): what the answer path reads to skip a write or
   * refuse a read instead of waiting out a timeout. False while the first
   * open is still under way.
   */
  get down(): boolean {
    return this.settled && !this.answering;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopProbing();
    const store = await this.opening?.catch(() => undefined);
    await store?.close();
  }
}
