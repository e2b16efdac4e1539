import { setTimeout as sleep } from "node:timers/promises";
import { sql, type Kysely } from "kysely";
import type { BatchOutputLine } from "../../api/batches.js";
import { newId } from "../../api/responses-response.js";
import {
  INTERACTIVE_LOAD_HEADER,
  PRIORITY_HEADER,
  RESPONSE_ID_HEADER,
} from "../../api/runtime-wire.js";
import { isCodedError } from "../../lib/coded-error.js";
import { errorText } from "../../lib/error-text.js";
import type { Logger } from "../../lib/logger.js";
import { randomHex } from "../../lib/random-hex.js";
import { newRequestId } from "../plugins/request-id.js";
import type { ModelRegistry } from "../registry/registry.js";
import type { Database } from "../store/database.js";
import type { LedgerEntry } from "../store/ledger-entry.js";
import { recordLedgerEntries } from "../store/usage-ledger.js";
import type { Upstream } from "../upstream/forward.js";
import { relayOf } from "../upstream/relay.js";
import { BatchPacer, LEASE_LINES, leaseSize } from "./batch-pacer.js";
import { batchCostOf } from "./batch-pricing.js";
import { addCounts, noCounts, type Counts } from "./batch-store.js";
import { validateLines } from "./batch-validation.js";
import {
  sweepAbandonedUploads,
  sweepExpiredFiles,
  sweepFileTombstones,
  writeGeneratedFile,
} from "./file-store.js";

/**
 * A batch worker, one in each gateway replica. Every step is a claim in the
 * store, so any number of replicas share the work and none runs a step
 * twice:
 *
 * - validation: a `validating` batch is locked (`FOR UPDATE SKIP LOCKED`),
 *   its file checked line by line and written as `batch_lines`, in one
 *   transaction: a batch is validated once, whole, or not at all;
 * - lines: a pump leases chunks of pending lines (`FOR UPDATE SKIP LOCKED`
 *   with an expiry), runs them against a runtime at batch priority, as many
 *   at once as the pacer allows (fewer while the runtime has interactive
 *   work), and writes results in groups, each in one transaction with its
 *   usage, and each result only while the line is still pending and still
 *   this worker's. A killed worker's leases expire and another takes the
 *   lines; a result is written once;
 * - finalization: a batch with nothing pending, past its window, or being
 *   cancelled is locked and finished in one transaction (output and error
 *   files, the final status).
 *
 * State lives only in the store: a batch survives the restart of every
 * gateway, and the first worker up resumes it.
 */
export interface BatchWorkerOptions {
  /** The migrated store's handle; rejects while it cannot be opened. */
  store: () => Promise<Kysely<Database>>;
  registry: ModelRegistry;
  upstream: Upstream;
  logger: Logger;
  /**
   * Lines in flight in this replica at most; the pacer keeps fewer while
   * the runtimes have interactive work (batch work fills idle capacity only).
   */
  concurrency: number;
  /** How long a leased line is this worker's before another may take it. */
  leaseMs: number;
  /** Pause of an idle runner before it looks for work again. */
  pollMs: number;
  /**
   * Milliseconds between lines while the runtime has interactive traffic it
   * keeps up with (the pacer's steady share; default `SHARE_SPACING_MS`).
   */
  pacedSpacingMs?: number | undefined;
  /** Lines leased at once. */
  linesPerLease?: number;
  /** The synchronous route's body limit, which every line's body must keep to. */
  bodyLimitBytes: number;
  now?: () => number;
  /** Distinguishes this worker's leases (default: random). */
  workerId?: string;
}

/** A line leased to this worker, with what billing needs of its batch. */
interface LeasedLine {
  batch_id: string;
  line_no: number;
  custom_id: string;
  body: string;
  account: string;
  project: string | null;
  key_id: string;
  /** The failures runtimes answered for its request so far (MAX_LINE_ATTEMPTS). */
  attempts: number;
}

/**
 * A line's result, or a retry a second later: `counted` when a runtime
 * answered the request with a failure (a 5xx but 503), which
 * MAX_LINE_ATTEMPTS bounds; a runtime that could not be reached, had no
 * room (503) or dropped the connection is waited for until the window ends.
 */
type Outcome =
  | { state: "completed" | "failed"; line: BatchOutputLine; ledger: LedgerEntry | null }
  | { state: "retry"; counted?: boolean };

/**
 * Failures a runtime answered for a line's request before the line is
 * failed with the last of them: a request the runtime cannot answer would
 * otherwise be sent every second until the window ends.
 */
export const MAX_LINE_ATTEMPTS = 3;

/** How long output and error files are kept when the batch names no `output_expires_after`. */
const OUTPUT_FILE_DAYS = 30;
/** The counter row of the lines a finalization fails (a worker's own is its id). */
const FINAL_SLOT = "final";
const RETRY_DELAY_MS = 1000;
const SWEEP_EVERY_MS = 60_000;
const ABANDONED_UPLOAD_MS = 60 * 60_000;
/** Results written in one transaction at most, and how long a partial group waits. */
const WRITE_GROUP = 64;
const WRITE_EVERY_MS = 50;
/**
 * ... and while the pacer spaces lines out beside interactive traffic: a
 * trickle of lines then wrote a transaction of two or three results every
 * 50 ms, store CPU beside the interactive requests for little; the counts
 * a client sees lag by this much at most.
 */
const PACED_WRITE_EVERY_MS = 250;

export class BatchWorker {
  readonly id: string;
  private stopped = false;
  private readonly abort = new AbortController();
  private loops: Promise<void>[] = [];
  private lastSweep = 0;
  /** When a lease last found nothing: idle runners then look once per poll between them. */
  private lastEmptyLease = Number.NEGATIVE_INFINITY;
  private readonly now: () => number;
  private readonly pacer: BatchPacer;
  /** Leased here and not yet running, in line order. */
  private local: LeasedLine[] = [];
  /** Run and not yet handed to the writer. */
  private results: Array<[LeasedLine, Outcome]> = [];
  /** The writer: one group's transaction after another. */
  private writing: Promise<void> = Promise.resolve();
  private lastWrite = 0;
  /**
   * A line's time from sending to its answer, smoothed (EWMA): sizes leases.
   * Starts at a slow model's, so that the pace is not overestimated before
   * the first answers.
   */
  private lineMs = 1000;
  /** Per batch, the line after the last this worker leased: where its next lease looks first. */
  private readonly scanFrom = new Map<string, number>();

  constructor(private readonly options: BatchWorkerOptions) {
    this.id = options.workerId ?? `worker-${randomHex(8)}`;
    this.now = options.now ?? Date.now;
    this.pacer = new BatchPacer(Math.max(1, options.concurrency), {
      shareSpacingMs: options.pacedSpacingMs,
    });
  }

  start(): void {
    if (this.options.concurrency < 1) return;
    this.loops.push(this.loop("housekeeping", () => this.housekeeping()));
    this.loops.push(this.pump());
  }

  /** Stops leasing, cancels what runs, and hands this worker's leases back at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await Promise.all(this.loops);
    const db = await this.options.store().catch(() => null);
    await db
      ?.updateTable("batch_lines")
      .set({ lease_owner: null, lease_until: null })
      .where("lease_owner", "=", this.id)
      .where("state", "=", "pending")
      .execute()
      .catch(() => undefined);
  }

  /** Runs `step` until stopped; a step that found nothing to do (false) waits `pollMs`. */
  private async loop(name: string, step: () => Promise<boolean>): Promise<void> {
    while (!this.stopped) {
      let busy = false;
      try {
        busy = await step();
      } catch (error) {
        if (this.stopped) return;
        this.options.logger.warn(
          { worker: this.id, err: errorText(error) },
          `batch ${name} failed`,
        );
      }
      if (!busy && !this.stopped) {
        await sleep(this.options.pollMs, undefined, { signal: this.abort.signal }).catch(
          () => undefined,
        );
      }
    }
  }

  private async housekeeping(): Promise<boolean> {
    const db = await this.options.store();
    if (this.now() - this.lastSweep > SWEEP_EVERY_MS) {
      this.lastSweep = this.now();
      await sweepAbandonedUploads(db, new Date(this.now() - ABANDONED_UPLOAD_MS));
      await sweepExpiredFiles(db);
      await sweepFileTombstones(db);
    }
    // Until the registry has its models, a model would look unknown: no validation yet.
    const validated = this.registryLoaded() ? await this.validateNext(db) : false;
    const finalized = await this.finalizeNext(db);
    return validated || finalized;
  }

  /** Validates one `validating` batch, if any is free; true when it did. */
  async validateNext(db: Kysely<Database>): Promise<boolean> {
    const validated = await db.transaction().execute(async (trx) => {
      const batch = await trx
        .selectFrom("batches")
        .selectAll()
        .where("status", "=", "validating")
        .orderBy("created_at")
        .limit(1)
        .forUpdate()
        .skipLocked()
        .executeTakeFirst();
      if (!batch) return null;
      const { total, errorCount, errors, model } = await validateLines(
        trx,
        batch,
        this.options.registry,
        this.options.bodyLimitBytes,
      );
      const at = new Date(this.now());
      if (errorCount > 0) {
        await trx.deleteFrom("batch_lines").where("batch_id", "=", batch.id).execute();
        await trx
          .updateTable("batches")
          .set({
            status: "failed",
            failed_at: at,
            errors: JSON.stringify(errors),
            total: 0,
            model,
          })
          .where("id", "=", batch.id)
          .execute();
        this.options.logger.info(
          { batch: batch.id, errors: errorCount },
          "batch failed validation",
        );
        return "failed";
      } else {
        await trx
          .updateTable("batches")
          .set({ status: "in_progress", in_progress_at: at, total, model })
          .where("id", "=", batch.id)
          .execute();
        this.options.logger.info({ batch: batch.id, total }, "batch in progress");
        return "in_progress";
      }
    });
    // The planner's statistics must know the batch's lines before they are
    // leased: with none for its id it takes the batch for one row, and the
    // lease's UPDATE joined every line of the batch to each leased one (on
    // PostgreSQL, 1 s a lease of 64 over 50,000 lines, against 0.6 ms after
    // ANALYZE). Autovacuum analyzes only after a tenth of the table has
    // changed: in a large table, never for one batch. Sampled, so its cost
    // does not grow with the table. One that fails is only logged: the batch
    // is validated either way, and stale statistics cost time, not results.
    if (validated === "in_progress") {
      await sql`ANALYZE batch_lines`.execute(db).catch((error: unknown) => {
        this.options.logger.warn({ err: errorText(error) }, "ANALYZE batch_lines failed");
      });
    }
    return validated !== null;
  }

  /**
   * Finishes one batch that is done, past its window, or being cancelled:
   * its unfinished lines are reported as `batch_expired` or `batch_cancelled`
   * in the error file, finished ones are kept; true when it did.
   */
  async finalizeNext(db: Kysely<Database>): Promise<boolean> {
    const now = new Date(this.now());
    return db.transaction().execute(async (trx) => {
      const batch = await trx
        .selectFrom("batches")
        .selectAll()
        .where((eb) =>
          eb.or([
            eb("status", "=", "cancelling"),
            eb.and([
              eb("status", "=", "in_progress"),
              eb.or([
                eb("expires_at", "<=", now),
                eb.not(
                  eb.exists(
                    eb
                      .selectFrom("batch_lines")
                      .select(sql.lit(1).as("one"))
                      .whereRef("batch_lines.batch_id", "=", "batches.id")
                      .where("batch_lines.state", "=", "pending"),
                  ),
                ),
              ]),
            ]),
          ]),
        )
        .orderBy("created_at")
        .limit(1)
        .forUpdate()
        .skipLocked()
        .executeTakeFirst();
      if (!batch) return false;
      const terminal =
        batch.status === "cancelling"
          ? "cancelled"
          : batch.expires_at <= now
            ? "expired"
            : "completed";
      if (terminal !== "completed") {
        const code = terminal === "expired" ? "batch_expired" : "batch_cancelled";
        const message =
          terminal === "expired"
            ? "This request was not run within the batch's completion window."
            : "This request was not run: the batch was cancelled.";
        const failed = await sql<{ n: string }>`
          WITH failed AS (
            UPDATE batch_lines SET state = 'failed', lease_owner = NULL, lease_until = NULL,
              result = json_build_object(
                'id', 'batch_req_' || substr(md5(batch_id || ':' || line_no), 1, 24),
                'custom_id', custom_id,
                'response', NULL,
                'error', json_build_object('code', ${code}::text, 'message', ${message}::text)
              )::text
            WHERE batch_id = ${batch.id} AND state = 'pending'
            RETURNING 1
          )
          SELECT count(*) AS n FROM failed
        `.execute(trx);
        const n = Number(failed.rows[0]?.n ?? 0);
        await addCounts(trx, FINAL_SLOT, new Map([[batch.id, { ...noCounts(), failed: n }]]));
      }
      const file = (kind: "output" | "error") => ({
        owner: { account: batch.account, project: batch.project },
        purpose: "batch_output" as const,
        filename: `${batch.id}_${kind}.jsonl`,
        createdAt: now,
        expiresAt: new Date(
          now.getTime() + (batch.output_expires_after_seconds ?? OUTPUT_FILE_DAYS * 86_400) * 1000,
        ),
      });
      const outputId = (await hasLines(trx, batch.id, "completed"))
        ? await writeGeneratedFile(trx, file("output"), resultsOf(trx, batch.id, "completed"))
        : null;
      const errorId = (await hasLines(trx, batch.id, "failed"))
        ? await writeGeneratedFile(trx, file("error"), resultsOf(trx, batch.id, "failed"))
        : null;
      await trx
        .updateTable("batches")
        .set({
          status: terminal,
          finalizing_at: now,
          [`${terminal}_at`]: now,
          output_file_id: outputId,
          error_file_id: errorId,
        })
        .where("id", "=", batch.id)
        .execute();
      this.options.logger.info({ batch: batch.id, status: terminal }, "batch finalized");
      return true;
    });
  }

  private registryLoaded(): boolean {
    return this.options.registry.list().length > 0;
  }

  /**
   * Runs leased lines, as many at once as the pacer allows, leasing the next
   * chunk before the last runs dry; results go to the writer as they come.
   */
  private async pump(): Promise<void> {
    const running = new Set<Promise<void>>();
    while (!this.stopped) {
      try {
        if (!this.registryLoaded()) {
          await this.pause();
          continue;
        }
        const db = await this.options.store();
        if (this.local.length < this.pacer.limit && this.leaseDue()) {
          // Lines held while paced down to one in flight (a slow model) must
          // not outlive their lease unrun (leaseSize).
          const count = Math.min(
            this.options.linesPerLease ?? LEASE_LINES.max,
            leaseSize({
              limit: this.pacer.limit,
              spacingMs: this.pacer.spacingMs,
              lineMs: this.lineMs,
              leaseMs: this.options.leaseMs,
            }),
          );
          const leased = await this.lease(db, count);
          if (leased.length === 0) this.lastEmptyLease = this.now();
          this.local.push(...leased);
        }
        while (this.local.length > 0 && running.size < this.pacer.limit && !this.stopped) {
          if (this.pacer.spacingMs > 0) await this.pause(this.pacer.spacingMs);
          if (running.size >= this.pacer.limit || this.stopped) break;
          const line = this.local.shift()!;
          const task: Promise<void> = this.runLine(db, line).finally(() => running.delete(task));
          running.add(task);
        }
        if (running.size > 0) {
          await Promise.race(running);
        } else {
          // Nothing runs and nothing is leased: what is done is written, then a pause.
          await this.flushResults(db);
          await this.pause();
        }
      } catch (error) {
        if (this.stopped) break;
        this.options.logger.warn({ worker: this.id, err: errorText(error) }, "batch runner failed");
        await this.pause();
      }
    }
    await Promise.allSettled(running);
    const db = await this.options.store().catch(() => null);
    if (db) await this.flushResults(db);
  }

  private leaseDue(): boolean {
    return this.now() - this.lastEmptyLease >= this.options.pollMs;
  }

  private pause(ms = this.options.pollMs): Promise<void> {
    return sleep(ms, undefined, { signal: this.abort.signal }).catch(() => undefined);
  }

  private async runLine(db: Kysely<Database>, line: LeasedLine): Promise<void> {
    const outcome = await this.run(line);
    this.results.push([line, outcome]);
    const every = this.pacer.spacingMs > 0 ? PACED_WRITE_EVERY_MS : WRITE_EVERY_MS;
    if (this.results.length >= WRITE_GROUP || this.now() - this.lastWrite >= every) {
      void this.flushResults(db);
    }
  }

  /**
   * Hands the results gathered so far to the writer: groups are written one
   * after another, each in one transaction. A group that fails to write is
   * not lost work: its lines are still leased to this worker, and once the
   * lease expires another worker runs them again.
   */
  private flushResults(db: Kysely<Database>): Promise<void> {
    const group = this.results.splice(0);
    if (group.length === 0) return this.writing;
    this.lastWrite = this.now();
    this.writing = this.writing
      .then(() => this.record(db, group))
      .catch((error: unknown) => {
        this.options.logger.warn(
          { worker: this.id, lines: group.length, err: errorText(error) },
          "batch results not written; the lines run again after their lease",
        );
      });
    return this.writing;
  }

  /**
   * Leases up to `count` pending lines whose lease is free or expired: the
   * oldest batch's first, in line order. One batch at a time, so that each
   * statement walks one batch's pending index in order and stops after
   * `count` rows; ordering every batch's pending lines together made each
   * lease sort them all, a cost growing with what was pending.
   */
  async lease(db: Kysely<Database>, count: number): Promise<LeasedLine[]> {
    const now = new Date(this.now());
    const batches = await db
      .selectFrom("batches")
      .select(["id", "account", "project", "key_id"])
      .where("status", "=", "in_progress")
      .where("expires_at", ">", now)
      .orderBy("created_at")
      .orderBy("id")
      .execute();
    const leased: LeasedLine[] = [];
    for (const batch of batches) {
      if (leased.length >= count) break;
      const from = this.scanFrom.get(batch.id) ?? 0;
      let lines = await this.leaseLines(db, batch.id, from, count - leased.length);
      // Nothing after where this worker last leased: lines before it (a
      // dead worker's expired leases, lines handed back to retry) are looked for.
      if (lines.length < count - leased.length && from > 0) {
        lines = lines.concat(
          await this.leaseLines(db, batch.id, 0, count - leased.length - lines.length),
        );
      }
      if (lines.length > 0)
        this.scanFrom.set(batch.id, Math.max(...lines.map((line) => line.line_no)) + 1);
      else this.scanFrom.delete(batch.id);
      for (const line of lines) {
        leased.push({
          ...line,
          batch_id: batch.id,
          account: batch.account,
          project: batch.project,
          key_id: batch.key_id,
        });
      }
    }
    return leased.sort((a, b) => a.line_no - b.line_no);
  }

  /**
   * One batch's free pending lines from `from` on, in line order. The range
   * keeps the walk of the pending index short: its entries before `from` are
   * for lines done or leased, dead until vacuumed.
   */
  private async leaseLines(
    db: Kysely<Database>,
    batchId: string,
    from: number,
    count: number,
  ): Promise<Array<Pick<LeasedLine, "line_no" | "custom_id" | "body" | "attempts">>> {
    const now = new Date(this.now());
    const until = new Date(this.now() + this.options.leaseMs);
    // The pick is a CTE, so it runs once: as an IN (...) subquery the
    // planner may run it again per row, each run skipping other rows.
    const result = await sql<Pick<LeasedLine, "line_no" | "custom_id" | "body" | "attempts">>`
      WITH picked AS MATERIALIZED (
        SELECT c.line_no FROM batch_lines AS c
        WHERE c.batch_id = ${batchId} AND c.state = 'pending' AND c.line_no >= ${from}
          AND (c.lease_until IS NULL OR c.lease_until < ${now})
        ORDER BY c.line_no
        LIMIT ${count}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE batch_lines AS l
      SET lease_owner = ${this.id}, lease_until = ${until}
      FROM picked
      WHERE l.batch_id = ${batchId} AND l.line_no = picked.line_no
      RETURNING l.line_no, l.custom_id, l.body, l.attempts
    `.execute(db);
    return result.rows;
  }

  /**
   * Writes a group of results in one transaction and two statements: each
   * result only while its line is still pending and still this worker's,
   * and the usage of exactly those written; a line to retry is handed back
   * for a short while instead.
   */
  private async record(db: Kysely<Database>, outcomes: Array<[LeasedLine, Outcome]>) {
    if (outcomes.length === 0) return;
    const done = outcomes.filter(
      (entry): entry is [LeasedLine, Extract<Outcome, { state: "completed" | "failed" }>] =>
        entry[1].state !== "retry",
    );
    const retry = outcomes.filter(([, outcome]) => outcome.state === "retry");
    await db.transaction().execute(async (trx) => {
      if (retry.length > 0) {
        const lines = JSON.stringify(
          retry.map(([line, outcome]) => ({
            batch_id: line.batch_id,
            line_no: line.line_no,
            counted: outcome.state === "retry" && outcome.counted ? 1 : 0,
          })),
        );
        // Any worker may try them again after a short while.
        await sql`
          UPDATE batch_lines AS l
          SET lease_until = ${new Date(this.now() + RETRY_DELAY_MS)},
            attempts = l.attempts + v.counted
          FROM json_to_recordset(${lines}::json)
            AS v(batch_id text, line_no integer, counted integer)
          WHERE l.batch_id = v.batch_id AND l.line_no = v.line_no
            AND l.lease_owner = ${this.id} AND l.state = 'pending'
        `.execute(trx);
      }
      if (done.length === 0) return;
      const rows = JSON.stringify(
        done.map(([line, outcome]) => ({
          batch_id: line.batch_id,
          line_no: line.line_no,
          state: outcome.state,
          result: JSON.stringify(outcome.line),
        })),
      );
      const written = await sql<{ batch_id: string; line_no: number; state: string }>`
        UPDATE batch_lines AS l
        SET state = v.state, result = v.result, lease_owner = NULL, lease_until = NULL
        FROM json_to_recordset(${rows}::json)
          AS v(batch_id text, line_no integer, state text, result text)
        WHERE l.batch_id = v.batch_id AND l.line_no = v.line_no
          AND l.lease_owner = ${this.id} AND l.state = 'pending'
        RETURNING l.batch_id, l.line_no, l.state
      `.execute(trx);
      // A line not written was taken by another worker after this lease
      // expired, or its batch ended: its result is not this one, nor its usage.
      const mine = new Set(written.rows.map((row) => `${row.batch_id}:${row.line_no}`));
      const ledger = done.flatMap(([line, outcome]) =>
        outcome.ledger && mine.has(`${line.batch_id}:${line.line_no}`) ? [outcome.ledger] : [],
      );
      const counts = new Map<string, Counts>();
      const countOf = (batchId: string) => {
        const entry = counts.get(batchId) ?? noCounts();
        counts.set(batchId, entry);
        return entry;
      };
      for (const row of written.rows) {
        if (row.state === "completed") countOf(row.batch_id).completed++;
        else countOf(row.batch_id).failed++;
      }
      for (const [line, outcome] of done) {
        if (!outcome.ledger || !mine.has(`${line.batch_id}:${line.line_no}`)) continue;
        const entry = countOf(line.batch_id);
        entry.inputTokens += outcome.ledger.inputTokens;
        entry.cachedTokens += outcome.ledger.cachedTokens ?? 0;
        entry.outputTokens += outcome.ledger.outputTokens;
      }
      await addCounts(trx, this.id, counts);
      await recordLedgerEntries(trx, ledger);
    });
  }

  /** A failure the runtime answered: retried, or the line's result once it is the last allowed. */
  private attempted(line: LeasedLine, last: () => Outcome): Outcome {
    if (line.attempts + 1 < MAX_LINE_ATTEMPTS) return { state: "retry", counted: true };
    this.options.logger.warn(
      { batch: line.batch_id, line: line.line_no, attempts: MAX_LINE_ATTEMPTS },
      "batch line answered with a failure every time; given up",
    );
    return last();
  }

  /** Sends one line to a runtime of its model, at batch priority. */
  private async run(line: LeasedLine): Promise<Outcome> {
    // The output line's id, and the id of the request made for it (sent to
    // the runtime, kept in the ledger), as OpenAI's output lines have both.
    const lineId = `batch_req_${randomHex(12)}`;
    const requestId = newRequestId();
    const body = JSON.parse(line.body) as { model: string };
    const failed = (code: string, message: string): Outcome => ({
      state: "failed",
      line: { id: lineId, custom_id: line.custom_id, response: null, error: { code, message } },
      ledger: null,
    });
    const model = this.options.registry.resolve(body.model);
    // Validation found the model: one gone since (or not yet listed after a
    // restart) is waited for within the window, then the line expires.
    if (!model || !model.routes.has("api-key")) return { state: "retry" };
    const responseId = newId("resp");
    let answer;
    const sentAt = performance.now();
    try {
      answer = await this.options.upstream.forward({
        model,
        body: Buffer.from(line.body),
        headers: {
          "content-type": "application/json",
          "x-request-id": requestId,
          [RESPONSE_ID_HEADER]: responseId,
          [PRIORITY_HEADER]: "batch",
        },
        signal: this.abort.signal,
      });
    } catch (error) {
      if (this.stopped) return { state: "retry" };
      // No runtime could be reached, none is ready, or the connection broke
      // with the request on it: waited for, within the window. A broken
      // connection is not counted against the line: a runtime that crashes
      // breaks every request it holds, and which one crashed it is not known.
      if (isCodedError(error) && error.statusCode !== 408) return { state: "retry" };
      if (isCodedError(error)) return failed(error.code, error.message);
      return { state: "retry" };
    }
    this.pacer.observe(Number(answer.headers[INTERACTIVE_LOAD_HEADER] ?? 0) || 0);
    this.lineMs += (performance.now() - sentAt - this.lineMs) / 8;
    const relay = relayOf(answer.status, answer.headers, model.id);
    const response = {
      status_code: answer.status,
      request_id: requestId,
      body: parseJson(answer.body),
    };
    if (relay.kind === "error") {
      // Any but a 5xx answered for this request (503: no room): waited for, within the window.
      if (answer.status < 500 || answer.status === 503) return { state: "retry" };
      // The runtime failed this request: the last such answer goes to the error file.
      return this.attempted(line, () => ({
        state: "failed",
        line: { id: lineId, custom_id: line.custom_id, response, error: null },
        ledger: null,
      }));
    }
    if (relay.kind === "client-error") {
      return {
        state: "failed",
        line: { id: lineId, custom_id: line.custom_id, response, error: null },
        ledger: null,
      };
    }
    if (!relay.usage) {
      // Without usage nothing can be billed: as the synchronous route, no answer for free.
      this.options.logger.error(
        { model: model.id, endpoint: answer.endpoint },
        "runtime answered without usage headers",
      );
      return failed("upstream_error", `The runtime of model '${model.id}' failed to answer.`);
    }
    const tokens = relay.usage;
    return {
      state: "completed",
      line: { id: lineId, custom_id: line.custom_id, response, error: null },
      ledger: {
        responseId,
        requestId,
        route: "/v1/batches",
        account: line.account,
        project: line.project,
        keyId: line.key_id,
        agentId: null,
        model: model.id,
        inputTokens: tokens.inputTokens,
        outputTokens: tokens.outputTokens,
        cachedTokens: tokens.cachedTokens ?? 0,
        cost: batchCostOf(tokens, model.prices),
        currency: model.prices.currency,
        time: new Date(this.now()).toISOString(),
      },
    };
  }
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return body.toString("utf8");
  }
}

async function hasLines(
  db: Kysely<Database>,
  batchId: string,
  state: "completed" | "failed",
): Promise<boolean> {
  const row = await db
    .selectFrom("batch_lines")
    .select("line_no")
    .where("batch_id", "=", batchId)
    .where("state", "=", state)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** A batch's result lines of one state, in input order, a page at a time. */
async function* resultsOf(
  db: Kysely<Database>,
  batchId: string,
  state: "completed" | "failed",
): AsyncGenerator<string, void, undefined> {
  const page = 1000;
  let after = 0;
  for (;;) {
    const rows = await db
      .selectFrom("batch_lines")
      .select(["line_no", "result"])
      .where("batch_id", "=", batchId)
      .where("state", "=", state)
      .where("line_no", ">", after)
      .orderBy("line_no")
      .limit(page)
      .execute();
    for (const row of rows) yield row.result!;
    if (rows.length < page) return;
    after = rows.at(-1)!.line_no;
  }
}
