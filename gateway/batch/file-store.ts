import { sql, type Insertable, type Kysely, type Selectable } from "kysely";
import {
  fileIdSchema,
  type FileObject,
  type FileListQuery,
  type FilePurpose,
} from "../../api/files.js";
import { randomHex } from "../../lib/random-hex.js";
import type { Database, FilesTable, FileTombstonesTable } from "../store/database.js";
import type { Owner } from "./owner.js";

/**
 * File content in the system of record: ordered chunks of at most
 * CHUNK_BYTES in `file_chunks`. A file is written as `uploading`, chunk by
 * chunk, and becomes visible (`processed`) only once its last chunk is in;
 * a refused or broken upload is deleted, chunks and all.
 */
export const CHUNK_BYTES = 1024 * 1024;

export function newFileId(): string {
  return `file-${randomHex(12)}`;
}

const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

export function fileObjectOf(row: Selectable<FilesTable>): FileObject {
  return {
    id: row.id,
    object: "file",
    bytes: Number(row.bytes),
    created_at: seconds(row.created_at),
    expires_at: row.expires_at ? seconds(row.expires_at) : null,
    filename: row.filename,
    purpose: row.purpose as FilePurpose,
    status: "processed",
  };
}

export interface NewFile {
  owner: Owner;
  purpose: FilePurpose;
  filename: string;
  createdAt: Date;
  expiresAt: Date | null;
}

/** Writes one file chunk by chunk; `finish` makes it visible, `discard` removes it. */
export class FileWriter {
  private seq = 0;
  bytes = 0;

  private constructor(
    private readonly db: Kysely<Database>,
    readonly id: string,
  ) {}

  static async open(db: Kysely<Database>, file: NewFile, id = newFileId()): Promise<FileWriter> {
    await db
      .insertInto("files")
      .values({
        id,
        account: file.owner.account,
        project: file.owner.project,
        purpose: file.purpose,
        filename: file.filename,
        state: "uploading",
        created_at: file.createdAt,
        expires_at: file.expiresAt,
      })
      .execute();
    return new FileWriter(db, id);
  }

  async write(data: Uint8Array): Promise<void> {
    if (data.length === 0) return;
    await this.db
      .insertInto("file_chunks")
      .values({ file_id: this.id, seq: this.seq++, data })
      .execute();
    this.bytes += data.length;
  }

  /** The finished file's row: read back in the same statement, so no second read can fail after it. */
  async finish(lines: number): Promise<Selectable<FilesTable>> {
    return this.db
      .updateTable("files")
      .set({ state: "processed", bytes: this.bytes, lines })
      .where("id", "=", this.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async discard(): Promise<void> {
    await this.db.deleteFrom("files").where("id", "=", this.id).execute();
  }
}

/**
 * Gathers a stream's bytes into chunks of CHUNK_BYTES for a FileWriter:
 * at most one chunk is held at a time.
 */
export class ChunkBuffer {
  private parts: Buffer[] = [];
  private size = 0;

  constructor(private readonly writer: Pick<FileWriter, "write">) {}

  async push(data: Buffer): Promise<void> {
    this.parts.push(data);
    this.size += data.length;
    if (this.size >= CHUNK_BYTES) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.size === 0) return;
    const whole = Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    await this.writer.write(whole);
  }
}

/**
 * A file past its `expires_at` is gone to its owner at once (by the
 * database's clock, the one every replica shares), before the sweep deletes
 * it.
 */
const unexpired = sql<boolean>`(expires_at IS NULL OR expires_at > now())`;

export async function findFile(
  db: Kysely<Database>,
  owner: Owner,
  id: string,
): Promise<Selectable<FilesTable> | undefined> {
  // An id we never mint is found nowhere; the database is not asked (a NUL
  // in a text parameter is an error there, not an absent row).
  if (!fileIdSchema.safeParse(id).success) return undefined;
  let query = db
    .selectFrom("files")
    .selectAll()
    .where("id", "=", id)
    .where("account", "=", owner.account)
    .where("state", "=", "processed")
    .where(unexpired);
  query =
    owner.project === null
      ? query.where("project", "is", null)
      : query.where("project", "=", owner.project);
  return query.executeTakeFirst();
}

/** The owner's rows of `files` or `file_tombstones` (no project: the account's own). */
const ownedBy = (owner: Owner) =>
  owner.project === null
    ? sql<boolean>`account = ${owner.account} AND project IS NULL`
    : sql<boolean>`account = ${owner.account} AND project = ${owner.project}`;

/** A place in a listing: the (`created_at`, `id`) a page continues after. */
export interface FileCursor {
  id: string;
  created_at: Date;
}

/**
 * The place an `after` cursor names, for listing only: one of the owner's
 * finished files whatever its expiry, or the tombstone of one deleted or
 * swept. The OpenAI clients page with the last id of the previous page, and
 * their usual cleanup loop (`for await (const f of files.list()) await
 * files.delete(f.id)`) has just deleted that file; one that expired between
 * two pages is the same. Another owner's id, or one never minted, is found
 * nowhere, exactly as by findFile: a tenant learns nothing of other ids.
 */
export async function findFileCursor(
  db: Kysely<Database>,
  owner: Owner,
  id: string,
): Promise<FileCursor | undefined> {
  if (!fileIdSchema.safeParse(id).success) return undefined;
  const live = db
    .selectFrom("files")
    .select(["id", "created_at"])
    .where("id", "=", id)
    .where("state", "=", "processed")
    .where(ownedBy(owner));
  const gone = db
    .selectFrom("file_tombstones")
    .select(["id", "created_at"])
    .where("id", "=", id)
    .where(ownedBy(owner));
  return live.unionAll(gone).executeTakeFirst();
}

export interface Page<T> {
  object: "list";
  data: T[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export function pageOf<T extends { id: string }>(items: T[], limit: number): Page<T> {
  const data = items.slice(0, limit);
  return {
    object: "list",
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: items.length > limit,
  };
}

/**
 * One page of the owner's files, by (`created_at`, `id`): the cursor is the
 * last id of the previous page, so a page never repeats or skips a file
 * while others are uploaded or deleted. A cursor that names no position of
 * the owner's (findFileCursor) gives null (the caller's 404).
 */
export async function listFiles(
  db: Kysely<Database>,
  owner: Owner,
  query: FileListQuery,
): Promise<Page<FileObject> | null> {
  let select = db
    .selectFrom("files")
    .selectAll()
    .where("account", "=", owner.account)
    .where("state", "=", "processed")
    .where(unexpired);
  select =
    owner.project === null
      ? select.where("project", "is", null)
      : select.where("project", "=", owner.project);
  if (query.purpose) select = select.where("purpose", "=", query.purpose);
  if (query.after) {
    const cursor = await findFileCursor(db, owner, query.after);
    if (!cursor) return null;
    const key = sql`(${cursor.created_at}::timestamptz, ${cursor.id}::text)`;
    select =
      query.order === "asc"
        ? select.where(sql<boolean>`(created_at, id) > ${key}`)
        : select.where(sql<boolean>`(created_at, id) < ${key}`);
  }
  const rows = await select
    .orderBy("created_at", query.order)
    .orderBy("id", query.order)
    .limit(query.limit + 1)
    .execute();
  return pageOf(rows.map(fileObjectOf), query.limit);
}

/** The file's bytes, chunk by chunk in order, a few chunks per query. */
export async function* fileContent(
  db: Kysely<Database>,
  id: string,
): AsyncGenerator<Buffer, void, undefined> {
  const perQuery = 4;
  for (let seq = 0; ; seq += perQuery) {
    const rows = await db
      .selectFrom("file_chunks")
      .select(["seq", "data"])
      .where("file_id", "=", id)
      .where("seq", ">=", seq)
      .where("seq", "<", seq + perQuery)
      .orderBy("seq")
      .execute();
    for (const row of rows)
      yield Buffer.from(row.data.buffer, row.data.byteOffset, row.data.length);
    if (rows.length < perQuery) return;
  }
}

/** The file's lines (without their line breaks), in order, 1-based; empty lines included. */
export async function* fileLines(
  db: Kysely<Database>,
  id: string,
): AsyncGenerator<{ line: number; text: string }, void, undefined> {
  let rest = "";
  let line = 0;
  const decoder = new TextDecoder("utf-8", { fatal: true });
  for await (const chunk of fileContent(db, id)) {
    const text = rest + decoder.decode(chunk, { stream: true });
    const parts = text.split("\n");
    rest = parts.pop()!;
    for (const part of parts) yield { line: ++line, text: part.replace(/\r$/, "") };
  }
  rest += decoder.decode();
  if (rest.length > 0) yield { line: ++line, text: rest.replace(/\r$/, "") };
}

/** What a file leaves for listing when it goes: its owner and its place. */
function tombstoneOf(
  file: Pick<Selectable<FilesTable>, "id" | "account" | "project" | "created_at">,
): Insertable<FileTombstonesTable> {
  return { id: file.id, account: file.account, project: file.project, created_at: file.created_at };
}

/**
 * Deletes the owner's file (its chunks cascade), leaving its tombstone;
 * false when there is none. Both in one transaction: the file is never gone
 * without the tombstone a list cursor naming it needs.
 */
export async function deleteFile(db: Kysely<Database>, owner: Owner, id: string): Promise<boolean> {
  const file = await findFile(db, owner, id);
  if (!file) return false;
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto("file_tombstones")
      .values(tombstoneOf(file))
      // A delete racing another, or the expiry sweep: one tombstone is enough.
      .onConflict((conflict) => conflict.column("id").doNothing())
      .execute();
    await trx.deleteFrom("files").where("id", "=", file.id).execute();
  });
  return true;
}

/**
 * How long a tombstone keeps a deleted or expired file's place: a listing
 * asks for its next page moments after the last, even when it deletes each
 * file of a 10,000-file page first; a day is ample, and bounds the table by
 * a day's deletions.
 */
export const FILE_TOMBSTONE_SECONDS = 86_400;

/** Drops tombstones older than `keepSeconds` (by the database's clock); how many. */
export async function sweepFileTombstones(
  db: Kysely<Database>,
  keepSeconds = FILE_TOMBSTONE_SECONDS,
): Promise<number> {
  const result = await db
    .deleteFrom("file_tombstones")
    .where(sql<boolean>`gone_at <= now() - make_interval(secs => ${keepSeconds})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/**
 * Uploads a process was writing when it died stay `uploading`: invisible,
 * and deleted once older than `olderThan`.
 */
export async function sweepAbandonedUploads(
  db: Kysely<Database>,
  olderThan: Date,
): Promise<number> {
  const result = await db
    .deleteFrom("files")
    .where("state", "=", "uploading")
    .where("created_at", "<", olderThan)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** Writes a whole generated file (a batch's output or errors) from its lines. */
export async function writeGeneratedFile(
  db: Kysely<Database>,
  file: NewFile,
  lines: AsyncIterable<string>,
): Promise<string> {
  const writer = await FileWriter.open(db, file);
  const buffer = new ChunkBuffer(writer);
  let count = 0;
  for await (const line of lines) {
    await buffer.push(Buffer.from(`${line}\n`));
    count++;
  }
  await buffer.flush();
  await writer.finish(count);
  return writer.id;
}

/**
 * Deletes the files past their `expires_at` (their chunks cascade), leaving
 * a tombstone for each finished one, in one statement: a list cursor naming
 * an expired file pages on after the sweep as before it. How many files.
 */
export async function sweepExpiredFiles(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ swept: string }>`
    WITH swept AS (
      DELETE FROM files WHERE expires_at <= now()
      RETURNING id, account, project, state, created_at
    ), tombstones AS (
      INSERT INTO file_tombstones (id, account, project, created_at)
      SELECT id, account, project, created_at FROM swept WHERE state = 'processed'
      ON CONFLICT (id) DO NOTHING
    )
    SELECT count(*) AS swept FROM swept
  `.execute(db);
  return Number(rows[0]!.swept);
}
