import type { ColumnType, Generated } from "kysely";
import type { BATCH_STATUSES } from "../../api/batches.js";

/**
 * The gateway's schema as Kysely sees it: one interface per table, with the
 * columns' names as in SQL (snake_case). The migrations in migrations/ are
 * what creates them; the store tests write and read every column through
 * these types, on both engines.
 */
export interface Database {
  usage_ledger: UsageLedgerTable;
  usage_export_cursor: UsageExportCursorTable;
  stored_responses: StoredResponsesTable;
  files: FilesTable;
  file_chunks: FileChunksTable;
  file_tombstones: FileTombstonesTable;
  batches: BatchesTable;
  batch_lines: BatchLinesTable;
  batch_counts: BatchCountsTable;
}

/** The routes a ledger row can come from. */
export const LEDGER_ROUTES = ["/v1/responses", "/pay/v1/responses", "/v1/batches"] as const;
export type LedgerRoute = (typeof LEDGER_ROUTES)[number];

/**
 * One answered request, keyed by the response id the gateway minted: the
 * key makes a row written twice (a batch retried, a journal replayed after a
 * crash) land once.
 */
export interface UsageLedgerTable {
  response_id: string;
  route: LedgerRoute;
  account: string;
  project: string | null;
  key_id: string | null;
  /** The payment route's `pay-agent-id`: unsigned, for the agent's own reading only. */
  agent_id: string | null;
  model: string;
  input_tokens: number;
  output_tokens: number;
  /** Of the input tokens, those the runtime read from its prefix cache (0 in rows from before 0005). */
  cached_tokens: ColumnType<number, number | undefined, never>;
  /** `numeric`: an exact decimal, read back as a string. */
  cost: string;
  currency: string;
  /** The caller's `x-request-id`: correlation only. */
  request_id: string;
  /** When the gateway answered the request. */
  answered_at: ColumnType<Date, Date | string, never>;
  /** When the row reached the ledger. */
  recorded_at: Generated<Date>;
  /** The transaction that wrote the row (`xid8`, read as a decimal string): the export order. */
  txid: Generated<string>;
  /** Orders the rows of one transaction. */
  seq: Generated<number>;
}

/** Where an exporter of the ledger is: every row at or before `(txid, seq)` is delivered. */
export interface UsageExportCursorTable {
  name: string;
  txid: string;
  seq: number;
  updated_at: Generated<Date>;
}

/**
 * A stored response (`store: true`), readable by its owner until it expires.
 * `owner` is the gateway's key for the verified caller (see
 * gateway/routes/stored-owner.ts), never a value the caller chose.
 */
export interface StoredResponsesTable {
  id: string;
  owner: string;
  model: string;
  previous_response_id: string | null;
  /** The request's input items (JSON text): what `input_items` lists. */
  input_items: string;
  /** The response object as it was answered (JSON text). */
  response: string;
  /** The runtime endpoint the gateway forwarded the request to. */
  served_by: string | null;
  created_at: ColumnType<Date, Date | string, never>;
  expires_at: ColumnType<Date, Date | string, never>;
}

/** A timestamp column written as a Date (or RFC 3339) and read as a Date. */
type Timestamp = ColumnType<Date, Date | string, Date | string>;

/** An uploaded or generated file; its bytes are in `file_chunks`. */
export interface FilesTable {
  id: string;
  account: string;
  project: string | null;
  purpose: string;
  filename: string;
  /** `bigint`: read back as a string by both engines' drivers. */
  bytes: ColumnType<string, number | string | undefined, number | string>;
  lines: ColumnType<number, number | undefined, number>;
  state: "uploading" | "processed";
  created_at: Timestamp;
  expires_at: Timestamp | null;
}

export interface FileChunksTable {
  file_id: string;
  seq: number;
  data: Uint8Array;
}

/**
 * A deleted or expired file's place in its owner's listing, kept for a
 * while so that a list cursor naming it still pages on (migration 0008).
 */
export interface FileTombstonesTable {
  id: string;
  account: string;
  project: string | null;
  created_at: Timestamp;
  gone_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export type BatchStatus = (typeof BATCH_STATUSES)[number];

export interface BatchesTable {
  id: string;
  account: string;
  project: string | null;
  key_id: string;
  input_file_id: string;
  endpoint: string;
  completion_window: string;
  status: BatchStatus;
  /** JSON text (migration 0011), as the create request gave it. */
  metadata: string | null;
  /** JSON text: the line errors of a failed validation. */
  errors: string | null;
  output_file_id: string | null;
  error_file_id: string | null;
  total: ColumnType<number, number | undefined, number>;
  created_at: Timestamp;
  expires_at: Timestamp;
  in_progress_at: Timestamp | null;
  finalizing_at: Timestamp | null;
  completed_at: Timestamp | null;
  failed_at: Timestamp | null;
  expired_at: Timestamp | null;
  cancelling_at: Timestamp | null;
  cancelled_at: Timestamp | null;
  /** How long the output and error files are kept; null: thirty days. */
  output_expires_after_seconds: ColumnType<number | null, number | null | undefined, never>;
  /** The one model its lines name, once validated (migration 0009). */
  model: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface BatchLinesTable {
  batch_id: string;
  line_no: number;
  custom_id: string;
  /** The request body as the input line held it (JSON text). */
  body: string;
  state: "pending" | "completed" | "failed";
  lease_owner: string | null;
  lease_until: Timestamp | null;
  /** The output line (JSON text) once the line has its result. */
  result: string | null;
  /** Failures a runtime answered for the line's request (migration 0010). */
  attempts: ColumnType<number, number | undefined, number>;
}

/** Results counted per batch and writer (migration 0006): a batch's counts are its slots' sums. */
export interface BatchCountsTable {
  batch_id: string;
  /** The worker that wrote the results, or `final` for lines failed by a finalization. */
  slot: string;
  completed: ColumnType<number, number | undefined, number>;
  failed: ColumnType<number, number | undefined, number>;
  /** The completed lines' tokens (migration 0009); bigint, read as strings. */
  input_tokens: ColumnType<string, number | undefined, number>;
  cached_tokens: ColumnType<string, number | undefined, number>;
  output_tokens: ColumnType<string, number | undefined, number>;
}
