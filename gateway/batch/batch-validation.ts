import type { Kysely, Selectable } from "kysely";
import { batchInputLineSchema, type BatchError } from "../../api/batches.js";
import { MAX_BATCH_LINES } from "../../api/files.js";
import { errorText } from "../../lib/error-text.js";
import { RequestBodySchema } from "../plugins/body-admission.js";
import type { ModelRegistry } from "../registry/registry.js";
import type { BatchesTable, Database } from "../store/database.js";
import { fileLines } from "./file-store.js";

/**
 * Validation of a batch input file, line by line, before anything runs:
 * each line must be a request the synchronous route would accept (the same
 * RequestBodySchema, on the API-key route, and no larger than its body
 * limit), to the batch's endpoint, with a custom_id of its own, without
 * `stream` and without `previous_response_id`
 * (a line is answered on its own, from no stored conversation: its earlier
 * turns go in `input` as messages). A pure decision per line; a
 * custom_id used twice is found by the store (see `validateLines`), so
 * nothing here grows with the file.
 */
export type LineVerdict =
  { ok: true; customId: string; model: string; body: string } | { ok: false; error: BatchError };

export class BatchLineValidator {
  private readonly schema: RequestBodySchema;

  constructor(
    registry: ModelRegistry,
    private readonly endpoint: string,
    /** The synchronous route's body limit: a line's body over it would be a 413 there. */
    private readonly bodyLimitBytes: number,
  ) {
    this.schema = new RequestBodySchema(registry, "api-key");
  }

  check(line: number, text: string): LineVerdict {
    const fail = (code: string, message: string, param: string | null = null): LineVerdict => ({
      ok: false,
      error: { code, message, param, line },
    });
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return fail("invalid_json_line", `Line ${line} is not a JSON object.`);
    }
    const shape = batchInputLineSchema.safeParse(parsed);
    if (!shape.success) {
      const issue = shape.error.issues[0]!;
      const param =
        issue.code === "unrecognized_keys"
          ? (issue.keys[0] ?? null)
          : issue.path.map(String).join(".") || null;
      return fail(
        "invalid_request",
        `Line ${line}: invalid '${param ?? "line"}': ${issue.message}.`,
        param,
      );
    }
    const { custom_id, url, body } = shape.data;
    if (url !== this.endpoint) {
      return fail(
        "invalid_url",
        `Line ${line}: the url '${url}' is not the batch's endpoint '${this.endpoint}'.`,
        "url",
      );
    }
    if (body.stream === true) {
      return fail("stream_unsupported", `Line ${line}: a batch does not stream.`, "body.stream");
    }
    if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
      return fail(
        "conversation_unsupported",
        `Line ${line}: a batch line is answered on its own, so previous_response_id is not supported; send the earlier turns as messages in input.`,
        "body.previous_response_id",
      );
    }
    const verdict = this.schema.validate(body);
    if ("error" in verdict) {
      const param = verdict.error.param === null ? "body" : `body.${verdict.error.param}`;
      return fail(verdict.error.code, `Line ${line}: ${verdict.error.message}`, param);
    }
    // A line's answer is kept in the output file, never as a stored
    // response, so the response it echoes says `store: false`.
    const sent = JSON.stringify({ ...body, store: false });
    const bytes = Buffer.byteLength(sent);
    if (bytes > this.bodyLimitBytes) {
      return fail(
        "request_too_large",
        `Line ${line}: the request body is ${bytes} bytes, over the limit of ${this.bodyLimitBytes} bytes.`,
        "body",
      );
    }
    return { ok: true, customId: custom_id, model: String(body.model), body: sent };
  }
}

export function duplicateCustomId(line: number, customId: string): BatchError {
  return {
    code: "duplicate_custom_id",
    message: `Line ${line}: the custom_id '${customId}' is used by an earlier line.`,
    param: "custom_id",
    line,
  };
}

/**
 * Line errors listed in a failed batch's `errors.data`, at most; past them
 * one more entry (`too_many_errors`) says how many were left out.
 */
export const MAX_LISTED_ERRORS = 1000;
/** Lines written to the store per statement. */
const INSERT_ROWS = 500;

export interface Validation {
  /** Requests in the file (non-empty lines). */
  total: number;
  /** Every problem found; the first MAX_LISTED_ERRORS are listed, in line order. */
  errorCount: number;
  errors: BatchError[];
  /**
   * The model every good line names, for the Batch object's `model`; null
   * when they name more than one or none is good. OpenAI's batches run one
   * model each; ours run each line on its own model, so a batch may mix them
   * (docs/batch.md).
   */
  model: string | null;
}

/**
 * Reads the batch's input file as a stream and writes each good line as a
 * pending `batch_lines` row, inside the caller's transaction. Memory stays
 * flat whatever the file: lines are read a chunk at a time and written
 * INSERT_ROWS at a time, and a repeated custom_id is found by the table's
 * UNIQUE (batch_id, custom_id) — a row that conflicts with an earlier one
 * is not written (`ON CONFLICT DO NOTHING`), and its absence from what the
 * insert returns names the line. Good lines are written even after an
 * error, so that every duplicate is still found; a batch with any error
 * keeps none of its rows (the caller deletes them).
 */
export async function validateLines(
  trx: Kysely<Database>,
  batch: Selectable<BatchesTable>,
  registry: ModelRegistry,
  bodyLimitBytes: number,
): Promise<Validation> {
  const result: Validation = { total: 0, errorCount: 0, errors: [], model: null };
  const models = new Set<string>();
  const addError = (error: BatchError) => {
    result.errorCount++;
    if (result.errors.length < MAX_LISTED_ERRORS) result.errors.push(error);
  };
  const file = await trx
    .selectFrom("files")
    .select(["id", "purpose"])
    .where("id", "=", batch.input_file_id)
    .where("state", "=", "processed")
    .executeTakeFirst();
  if (!file) {
    addError({
      code: "file_not_found",
      message: `The input file ${batch.input_file_id} no longer exists.`,
      param: "input_file_id",
      line: null,
    });
    return result;
  }
  const validator = new BatchLineValidator(registry, batch.endpoint, bodyLimitBytes);
  let rows: Array<{ line_no: number; custom_id: string; body: string }> = [];
  const insert = async (chunk: typeof rows) => {
    const written = await trx
      .insertInto("batch_lines")
      .values(chunk.map((row) => ({ ...row, batch_id: batch.id, state: "pending" as const })))
      .onConflict((conflict) => conflict.columns(["batch_id", "custom_id"]).doNothing())
      .returning("line_no")
      .execute();
    if (written.length < chunk.length) {
      const kept = new Set(written.map((row) => row.line_no));
      for (const row of chunk) {
        if (!kept.has(row.line_no)) addError(duplicateCustomId(row.line_no, row.custom_id));
      }
    }
  };
  // One insert in flight while the next rows are checked: the store writes
  // while the gateway parses, instead of each waiting for the other.
  let inserting: Promise<unknown> = Promise.resolve();
  let insertFailure: { error: unknown } | null = null;
  const settle = async () => {
    await inserting;
    if (insertFailure) throw insertFailure.error;
  };
  const flush = async () => {
    if (rows.length === 0) return;
    const chunk = rows;
    rows = [];
    await settle();
    inserting = insert(chunk).catch((error: unknown) => {
      insertFailure = { error };
    });
  };
  try {
    for await (const { line, text } of fileLines(trx, file.id)) {
      if (text.trim() === "") continue;
      result.total++;
      if (result.total > MAX_BATCH_LINES) {
        addError({
          code: "too_many_lines",
          message: `A batch holds at most ${MAX_BATCH_LINES} requests.`,
          param: null,
          line,
        });
        break;
      }
      const verdict = validator.check(line, text);
      if (!verdict.ok) {
        addError(verdict.error);
        continue;
      }
      if (models.size < 2) models.add(verdict.model);
      rows.push({ line_no: line, custom_id: verdict.customId, body: verdict.body });
      if (rows.length >= INSERT_ROWS) await flush();
    }
    await flush();
    await settle();
  } catch (error) {
    await inserting;
    addError({
      code: "invalid_file",
      message: `The input file could not be read as UTF-8 text: ${errorText(error)}`,
      param: null,
      line: null,
    });
  }
  if (result.total === 0 && result.errorCount === 0) {
    addError({
      code: "empty_file",
      message: "The input file has no requests.",
      param: null,
      line: null,
    });
  }
  if (models.size === 1) result.model = [...models][0]!;
  // A duplicate is found when its rows are written, a little after the lines around it.
  result.errors.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
  const unlisted = result.errorCount - result.errors.length;
  if (unlisted > 0) {
    // Without it a caller cannot tell a list of 1,000 from a list cut at 1,000.
    result.errors.push({
      code: "too_many_errors",
      message: `${unlisted} more ${unlisted === 1 ? "line has" : "lines have"} problems; only the first ${MAX_LISTED_ERRORS} are listed.`,
      param: null,
      line: null,
    });
  }
  return result;
}
