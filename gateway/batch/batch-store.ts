import { sql, type Kysely, type Selectable } from "kysely";
import { batchIdSchema, type BatchError, type BatchObject } from "../../api/batches.js";
import type { BatchListQuery } from "../../api/files.js";
import { usageOf } from "../../api/responses-response.js";
import { randomHex } from "../../lib/random-hex.js";
import type { BatchesTable, BatchStatus, Database } from "../store/database.js";
import { pageOf, type Page } from "./file-store.js";
import type { Owner } from "./owner.js";

/**
 * Batches in the system of record. `request_counts` and `usage` are kept
 * with the results they count (written in the same transaction), so they
 * move while the batch runs and can never disagree with the results.
 */
export function newBatchId(): string {
  return `batch_${randomHex(12)}`;
}

const seconds = (date: Date | null) => (date ? Math.floor(date.getTime() / 1000) : null);

/** A batch's results so far: lines completed and failed, and the completed lines' tokens. */
export interface Counts {
  completed: number;
  failed: number;
  inputTokens: number;
  cachedTokens: number;
  outputTokens: number;
}

export function noCounts(): Counts {
  return { completed: 0, failed: 0, inputTokens: 0, cachedTokens: 0, outputTokens: 0 };
}

export function batchObjectOf(row: Selectable<BatchesTable>, counts: Counts): BatchObject {
  const errors = row.errors === null ? null : (JSON.parse(row.errors) as BatchError[]);
  return {
    id: row.id,
    object: "batch",
    endpoint: row.endpoint as BatchObject["endpoint"],
    errors: errors && errors.length > 0 ? { object: "list", data: errors } : null,
    input_file_id: row.input_file_id,
    completion_window: row.completion_window as BatchObject["completion_window"],
    status: row.status,
    output_file_id: row.output_file_id,
    error_file_id: row.error_file_id,
    created_at: seconds(row.created_at)!,
    in_progress_at: seconds(row.in_progress_at),
    expires_at: seconds(row.expires_at),
    finalizing_at: seconds(row.finalizing_at),
    completed_at: seconds(row.completed_at),
    failed_at: seconds(row.failed_at),
    expired_at: seconds(row.expired_at),
    cancelling_at: seconds(row.cancelling_at),
    cancelled_at: seconds(row.cancelled_at),
    request_counts: { total: row.total, completed: counts.completed, failed: counts.failed },
    metadata: row.metadata === null ? null : (JSON.parse(row.metadata) as Record<string, string>),
    ...(row.model === null ? {} : { model: row.model }),
    usage: usageOf(counts.inputTokens, counts.outputTokens, counts.cachedTokens),
  };
}

export interface NewBatch {
  owner: Owner;
  keyId: string;
  inputFileId: string;
  endpoint: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
  createdAt: Date;
  expiresAt: Date;
  /** How long its output and error files are kept; null: the default. */
  outputExpiresAfterSeconds: number | null;
}

export async function createBatch(
  db: Kysely<Database>,
  batch: NewBatch,
): Promise<Selectable<BatchesTable>> {
  return db
    .insertInto("batches")
    .values({
      id: newBatchId(),
      account: batch.owner.account,
      project: batch.owner.project,
      key_id: batch.keyId,
      input_file_id: batch.inputFileId,
      endpoint: batch.endpoint,
      completion_window: batch.completionWindow,
      status: "validating",
      metadata: batch.metadata ? JSON.stringify(batch.metadata) : null,
      errors: null,
      created_at: batch.createdAt,
      expires_at: batch.expiresAt,
      output_expires_after_seconds: batch.outputExpiresAfterSeconds,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findBatch(
  db: Kysely<Database>,
  owner: Owner,
  id: string,
): Promise<Selectable<BatchesTable> | undefined> {
  // An id we never mint is found nowhere; the database is not asked (a NUL
  // in a text parameter is an error there, not an absent row).
  if (!batchIdSchema.safeParse(id).success) return undefined;
  let query = db
    .selectFrom("batches")
    .selectAll()
    .where("id", "=", id)
    .where("account", "=", owner.account);
  query =
    owner.project === null
      ? query.where("project", "is", null)
      : query.where("project", "=", owner.project);
  return query.executeTakeFirst();
}

/**
 * Each batch's results so far: the sums of its counters (migrations 0006
 * and 0009), written with the results they count.
 */
export async function countsOf(
  db: Kysely<Database>,
  ids: readonly string[],
): Promise<Map<string, Counts>> {
  const counts = new Map<string, Counts>(ids.map((id) => [id, noCounts()]));
  if (ids.length === 0) return counts;
  const rows = await db
    .selectFrom("batch_counts")
    .select((eb) => [
      "batch_id",
      eb.fn.sum<string>("completed").as("completed"),
      eb.fn.sum<string>("failed").as("failed"),
      eb.fn.sum<string>("input_tokens").as("input_tokens"),
      eb.fn.sum<string>("cached_tokens").as("cached_tokens"),
      eb.fn.sum<string>("output_tokens").as("output_tokens"),
    ])
    .where("batch_id", "in", ids)
    .groupBy("batch_id")
    .execute();
  for (const row of rows) {
    counts.set(row.batch_id, {
      completed: Number(row.completed),
      failed: Number(row.failed),
      inputTokens: Number(row.input_tokens),
      cachedTokens: Number(row.cached_tokens),
      outputTokens: Number(row.output_tokens),
    });
  }
  return counts;
}

/**
 * Adds results to a batch's counters, in the caller's transaction: `slot`
 * is the writer's own row, so writers never wait on each other's counter.
 */
export async function addCounts(
  db: Kysely<Database>,
  slot: string,
  added: ReadonlyMap<string, Counts>,
): Promise<void> {
  // Batch ids in order: two writers touching the same batches lock them in one order.
  const rows = [...added]
    .filter(([, c]) => c.completed + c.failed > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([batch_id, c]) => ({
      batch_id,
      slot,
      completed: c.completed,
      failed: c.failed,
      input_tokens: c.inputTokens,
      cached_tokens: c.cachedTokens,
      output_tokens: c.outputTokens,
    }));
  if (rows.length === 0) return;
  await db
    .insertInto("batch_counts")
    .values(rows)
    .onConflict((conflict) =>
      conflict.columns(["batch_id", "slot"]).doUpdateSet((eb) => ({
        completed: eb("batch_counts.completed", "+", eb.ref("excluded.completed")),
        failed: eb("batch_counts.failed", "+", eb.ref("excluded.failed")),
        input_tokens: eb("batch_counts.input_tokens", "+", eb.ref("excluded.input_tokens")),
        cached_tokens: eb("batch_counts.cached_tokens", "+", eb.ref("excluded.cached_tokens")),
        output_tokens: eb("batch_counts.output_tokens", "+", eb.ref("excluded.output_tokens")),
      })),
    )
    .execute();
}

export async function batchObject(
  db: Kysely<Database>,
  row: Selectable<BatchesTable>,
): Promise<BatchObject> {
  return batchObjectOf(row, (await countsOf(db, [row.id])).get(row.id)!);
}

/** One page of the owner's batches, newest first; null when `after` is not one of theirs. */
export async function listBatches(
  db: Kysely<Database>,
  owner: Owner,
  query: BatchListQuery,
): Promise<Page<BatchObject> | null> {
  let select = db.selectFrom("batches").selectAll().where("account", "=", owner.account);
  select =
    owner.project === null
      ? select.where("project", "is", null)
      : select.where("project", "=", owner.project);
  if (query.after) {
    const cursor = await findBatch(db, owner, query.after);
    if (!cursor) return null;
    select = select.where(
      sql<boolean>`(created_at, id) < (${cursor.created_at}::timestamptz, ${cursor.id}::text)`,
    );
  }
  const rows = await select
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .limit(query.limit + 1)
    .execute();
  const counts = await countsOf(
    db,
    rows.map((row) => row.id),
  );
  return pageOf(
    rows.map((row) => batchObjectOf(row, counts.get(row.id)!)),
    query.limit,
  );
}

const CANCELLABLE: readonly BatchStatus[] = ["validating", "in_progress"];

/**
 * Asks for a batch to stop: `cancelling` until a worker finalizes it as
 * `cancelled` (finished results kept). Asking again is answered with the
 * batch as it is; a finished batch cannot be cancelled.
 */
export async function requestCancel(
  db: Kysely<Database>,
  owner: Owner,
  id: string,
  now: Date,
): Promise<{ row: Selectable<BatchesTable> } | { notCancellable: BatchStatus } | null> {
  const found = await findBatch(db, owner, id);
  if (!found) return null;
  const updated = await db
    .updateTable("batches")
    .set({ status: "cancelling", cancelling_at: now })
    .where("id", "=", found.id)
    .where("status", "in", CANCELLABLE)
    .returningAll()
    .executeTakeFirst();
  if (updated) return { row: updated };
  const current = (await findBatch(db, owner, id))!;
  if (current.status === "cancelling" || current.status === "cancelled") return { row: current };
  return { notCancellable: current.status };
}
