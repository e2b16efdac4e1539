import type { ColumnType, Generated } from "kysely";

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
}

/** The routes a ledger row can come from. */
export const LEDGER_ROUTES = ["/v1/responses", "/pay/v1/responses"] as const;
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
