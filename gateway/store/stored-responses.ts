import { sql, type Kysely } from "kysely";
import { isResponseId } from "../../api/runtime-wire.js";
import type { Database } from "./database.js";

/**
 * The queries of stored responses. Every read and delete names the owner and
 * the clock: another owner's row, an expired row and a missing row all come
 * back as nothing, so no caller can tell them apart.
 */
export interface StoredResponseRow {
  id: string;
  owner: string;
  model: string;
  previousResponseId: string | null;
  /** JSON text of the input items. */
  inputItems: string;
  /** JSON text of the response object as answered. */
  response: string;
  /** The runtime endpoint that served it (for prefix-aware routing of a continuation). */
  servedBy: string | null;
  createdAt: Date;
  expiresAt: Date;
}

/** Turns read back for a conversation, at most: far more than any model's context holds. */
export const MAX_CONVERSATION_TURNS = 1000;

/**
 * One INSERT of one or more rows: the only statement storing adds to an
 * answer, shared by the answers that end together (ResponseStore.save).
 */
export async function insertStoredResponses(
  db: Kysely<Database>,
  rows: readonly StoredResponseRow[],
): Promise<void> {
  if (rows.length === 0) return;
  await db
    .insertInto("stored_responses")
    .values(
      rows.map((row) => ({
        id: row.id,
        owner: row.owner,
        model: row.model,
        previous_response_id: row.previousResponseId,
        input_items: row.inputItems,
        response: row.response,
        served_by: row.servedBy,
        created_at: row.createdAt,
        expires_at: row.expiresAt,
      })),
    )
    .execute();
}

type Selected = Database["stored_responses"] & { created_at: Date; expires_at: Date };

function toRow(row: Selected): StoredResponseRow {
  return {
    id: row.id,
    owner: row.owner,
    model: row.model,
    previousResponseId: row.previous_response_id,
    inputItems: row.input_items,
    response: row.response,
    servedBy: row.served_by,
    createdAt: new Date(row.created_at),
    expiresAt: new Date(row.expires_at),
  };
}

export async function loadStoredResponse(
  db: Kysely<Database>,
  id: string,
  owner: string,
  now: Date,
): Promise<StoredResponseRow | null> {
  // An id the gateway never mints is no row, and is not sent to the database:
  // a caller's text may hold what PostgreSQL's text refuses (a NUL byte),
  // which would fail the query rather than find nothing. So for every query here.
  if (!isResponseId(id)) return null;
  const row = await db
    .selectFrom("stored_responses")
    .selectAll()
    .where("id", "=", id)
    .where("owner", "=", owner)
    .where("expires_at", ">", now)
    .executeTakeFirst();
  return row ? toRow(row as Selected) : null;
}

/** True when the owner's live row was there (and is now gone). */
export async function deleteStoredResponse(
  db: Kysely<Database>,
  id: string,
  owner: string,
  now: Date,
): Promise<boolean> {
  if (!isResponseId(id)) return false;
  const result = await db
    .deleteFrom("stored_responses")
    .where("id", "=", id)
    .where("owner", "=", owner)
    .where("expires_at", ">", now)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** A conversation as read back: its newest turns, oldest first. */
export interface StoredConversation {
  turns: StoredResponseRow[];
  /**
   * Older live turns exist that were not read: the chain is longer than
   * `MAX_CONVERSATION_TURNS` or than the bytes asked for.
   */
  olderUnread: boolean;
}

/**
 * The conversation that ends with `id`, in one recursive query that follows
 * `previous_response_id` within the owner's live rows, newest first, until
 * the turns read hold `maxBytes` of stored text (the turn that reaches it
 * included) or number `MAX_CONVERSATION_TURNS`: a chain can grow without
 * bound, and what is read is held in memory. Null when `id` itself is not
 * one of the owner's live rows. A turn that was deleted or has expired ends
 * the chain there: the conversation starts after it.
 */
export async function loadConversation(
  db: Kysely<Database>,
  id: string,
  owner: string,
  now: Date,
  maxBytes: number,
): Promise<StoredConversation | null> {
  if (!isResponseId(id)) return null;
  const { rows } = await sql<Selected & { depth: number; read_bytes: number }>`
    WITH RECURSIVE chain AS (
      SELECT r.*, 1 AS depth, octet_length(r.input_items) + octet_length(r.response) AS read_bytes
        FROM stored_responses r
        WHERE r.id = ${id} AND r.owner = ${owner} AND r.expires_at > ${now}
      UNION ALL
      SELECT r.*, chain.depth + 1,
          chain.read_bytes + octet_length(r.input_items) + octet_length(r.response)
        FROM stored_responses r
        JOIN chain ON r.id = chain.previous_response_id
        WHERE r.owner = ${owner} AND r.expires_at > ${now}
          AND chain.depth < ${MAX_CONVERSATION_TURNS} AND chain.read_bytes < ${maxBytes}
    )
    SELECT * FROM chain ORDER BY depth DESC
  `.execute(db);
  const oldest = rows[0];
  if (!oldest) return null;
  const bounded = oldest.depth >= MAX_CONVERSATION_TURNS || oldest.read_bytes >= maxBytes;
  // Stopped at a bound: whether the turn before is there, or the chain ended anyway.
  const olderUnread =
    bounded &&
    oldest.previous_response_id !== null &&
    (await loadStoredResponse(db, oldest.previous_response_id, owner, now)) !== null;
  return { turns: rows.map(toRow), olderUnread };
}

/** Deletes every expired row; returns how many. */
export async function sweepStoredResponses(db: Kysely<Database>, now: Date): Promise<number> {
  const result = await db
    .deleteFrom("stored_responses")
    .where("expires_at", "<=", now)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
