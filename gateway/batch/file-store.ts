import { sql, type Kysely, type Selectable } from "kysely";
import {
  fileIdSchema,
  type FileObject,
  type FileListQuery,
  type FilePurpose,
} from "../../api/files.js";
import { randomHex } from "../../lib/random-hex.js";
import type { Database, FilesTable } from "../store/database.js";
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

  async finish(lines: number): Promise<void> {
    await this.db
      .updateTable("files")
      .set({ state: "processed", bytes: this.bytes, lines })
      .where("id", "=", this.id)
      .execute();
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

  constructor(private readonly writer: FileWriter) {}

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
 * while others are uploaded. A cursor that is not one of the owner's files
 * gives null (the caller's 400).
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
    const cursor = await findFile(db, owner, query.after);
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

/** Deletes the owner's file; false when there is none. */
export async function deleteFile(db: Kysely<Database>, owner: Owner, id: string): Promise<boolean> {
  const file = await findFile(db, owner, id);
  if (!file) return false;
  await db.deleteFrom("files").where("id", "=", file.id).execute();
  return true;
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

/** Deletes the files past their `expires_at` (their chunks cascade); how many. */
export async function sweepExpiredFiles(db: Kysely<Database>): Promise<number> {
  const result = await db
    .deleteFrom("files")
    .where(sql<boolean>`expires_at <= now()`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
