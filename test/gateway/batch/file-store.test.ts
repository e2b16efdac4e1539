import { describe, expect, it } from "vitest";
import {
  ChunkBuffer,
  CHUNK_BYTES,
  deleteFile,
  fileContent,
  fileLines,
  findFile,
  FileWriter,
  listFiles,
  sweepAbandonedUploads,
  sweepExpiredFiles,
  sweepFileTombstones,
} from "../../../gateway/batch/file-store.js";
import type { Owner } from "../../../gateway/batch/owner.js";
import { openStore, type Store } from "../../../gateway/store/store.js";
import { onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "../store/engines.js";

const engines = useStoreEngines();
const acme = { account: "acme", project: null };
const acmeWeb = { account: "acme", project: "web" };
const globex = { account: "globex", project: null };

async function store(engine: (typeof engines)[number]): Promise<Store> {
  const opened = await openStore(await engine.newTarget());
  onCleanup(() => opened.close());
  return opened;
}

async function upload(
  { db }: Store,
  owner: { account: string; project: string | null },
  content: Buffer,
  createdAt = new Date(),
  expiresAt: Date | null = null,
): Promise<string> {
  const writer = await FileWriter.open(db, {
    owner,
    purpose: "batch",
    filename: "in.jsonl",
    createdAt,
    expiresAt,
  });
  const buffer = new ChunkBuffer(writer);
  // Arrives in pieces smaller than a chunk, as a socket delivers it.
  for (let at = 0; at < content.length; at += 65_536) {
    await buffer.push(content.subarray(at, at + 65_536));
  }
  await buffer.flush();
  await writer.finish(content.toString().split("\n").filter(Boolean).length);
  return writer.id;
}

async function readAll(gen: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of gen) parts.push(part);
  return Buffer.concat(parts);
}

describe.each(engines)("file store on $name", (engine) => {
  it("gives back the exact bytes of a file of several chunks, and its lines", async () => {
    const opened = await store(engine);
    const line = (n: number) => `{"custom_id":"r${n}","pad":"${"é".repeat(n % 300)}"}`;
    const text = Array.from({ length: 12_000 }, (_, n) => line(n)).join("\n") + "\n";
    const content = Buffer.from(text);
    expect(content.length).toBeGreaterThan(2 * CHUNK_BYTES);
    const id = await upload(opened, acme, content);
    expect(id).toMatch(/^file-[0-9a-f]{24}$/);
    expect((await readAll(fileContent(opened.db, id))).equals(content)).toBe(true);
    const lines: string[] = [];
    for await (const { line: n, text: t } of fileLines(opened.db, id)) {
      expect(n).toBe(lines.length + 1);
      lines.push(t);
    }
    expect(lines).toEqual(Array.from({ length: 12_000 }, (_, n) => line(n)));
    const row = await findFile(opened.db, acme, id);
    expect(Number(row!.bytes)).toBe(content.length);
    expect(row!.lines).toBe(12_000);
  });

  it("keeps binary content byte for byte: every byte value, across a chunk boundary", async () => {
    const opened = await store(engine);
    // NULs, 0xff, lone UTF-8 continuation bytes: a text codec that mangled any would show.
    const content = Buffer.alloc(CHUNK_BYTES + 1000);
    for (let i = 0; i < content.length; i++) content[i] = (i * 7) % 256;
    const id = await upload(opened, acme, content);
    expect((await readAll(fileContent(opened.db, id))).equals(content)).toBe(true);
  });

  it("a file is its owner's: another account or project finds nothing", async () => {
    const opened = await store(engine);
    const id = await upload(opened, acme, Buffer.from("a\n"));
    expect(await findFile(opened.db, acme, id)).toBeDefined();
    expect(await findFile(opened.db, globex, id)).toBeUndefined();
    expect(await findFile(opened.db, acmeWeb, id)).toBeUndefined();
    expect(await deleteFile(opened.db, globex, id)).toBe(false);
    expect(await deleteFile(opened.db, acme, id)).toBe(true);
    expect(await findFile(opened.db, acme, id)).toBeUndefined();
    const chunks = await opened.db.selectFrom("file_chunks").selectAll().execute();
    expect(chunks).toEqual([]);
  });

  it("a file past its expires_at is gone at once, and the sweep deletes it and its chunks", async () => {
    const opened = await store(engine);
    const past = new Date(Date.now() - 1000);
    const later = new Date(Date.now() + 3_600_000);
    const expired = await upload(opened, acme, Buffer.from("a\n"), new Date(), past);
    const kept = await upload(opened, acme, Buffer.from("b\n"), new Date(), later);
    const forever = await upload(opened, acme, Buffer.from("c\n"));
    expect(await findFile(opened.db, acme, expired)).toBeUndefined();
    expect(await findFile(opened.db, acme, kept)).toBeDefined();
    const listed = (await listFiles(opened.db, acme, { limit: 10, order: "asc" }))!.data;
    expect(listed.map((f) => f.id).sort()).toEqual([kept, forever].sort());
    expect(await deleteFile(opened.db, acme, expired)).toBe(false);

    expect(await sweepExpiredFiles(opened.db)).toBe(1);
    const rows = await opened.db.selectFrom("files").select("id").execute();
    expect(rows.map((r) => r.id).sort()).toEqual([kept, forever].sort());
    const chunks = await opened.db.selectFrom("file_chunks").select("file_id").execute();
    expect(chunks.map((c) => c.file_id)).not.toContain(expired);
  });

  it("an upload is invisible until finished, and a discarded one leaves nothing", async () => {
    const opened = await store(engine);
    const writer = await FileWriter.open(opened.db, {
      owner: acme,
      purpose: "batch",
      filename: "x",
      createdAt: new Date(),
      expiresAt: null,
    });
    await writer.write(Buffer.from("half"));
    expect(await findFile(opened.db, acme, writer.id)).toBeUndefined();
    expect((await listFiles(opened.db, acme, { limit: 10, order: "desc" }))!.data).toEqual([]);
    await writer.discard();
    expect(await opened.db.selectFrom("files").selectAll().execute()).toEqual([]);
    expect(await opened.db.selectFrom("file_chunks").selectAll().execute()).toEqual([]);
  });

  it("abandoned uploads are swept once old, finished files are not", async () => {
    const opened = await store(engine);
    const old = new Date(Date.now() - 3_600_000);
    await FileWriter.open(opened.db, {
      owner: acme,
      purpose: "batch",
      filename: "x",
      createdAt: old,
      expiresAt: null,
    });
    const kept = await upload(opened, acme, Buffer.from("a\n"), old);
    expect(await sweepAbandonedUploads(opened.db, new Date(Date.now() - 60_000))).toBe(1);
    expect((await opened.db.selectFrom("files").select("id").execute()).map((r) => r.id)).toEqual([
      kept,
    ]);
  });

  it("pages by cursor in both orders without repeating or skipping, per purpose", async () => {
    const opened = await store(engine);
    const base = Date.UTC(2026, 10, 25, 12);
    const ids: string[] = [];
    // Two files share each second: the id breaks the tie.
    for (let n = 0; n < 7; n++) {
      ids.push(
        await upload(
          opened,
          acme,
          Buffer.from(`${n}\n`),
          new Date(base + Math.floor(n / 2) * 1000),
        ),
      );
    }
    await upload(opened, globex, Buffer.from("other\n"), new Date(base));
    const walk = async (order: "asc" | "desc") => {
      const seen: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = (await listFiles(opened.db, acme, {
          limit: 3,
          order,
          ...(after ? { after } : {}),
        }))!;
        seen.push(...page.data.map((f) => f.id));
        if (!page.has_more) return seen;
        after = page.last_id!;
      }
    };
    const asc = await walk("asc");
    expect(asc).toHaveLength(7);
    expect(new Set(asc)).toEqual(new Set(ids));
    expect(await walk("desc")).toEqual([...asc].reverse());
    expect(
      await listFiles(opened.db, acme, { limit: 3, order: "asc", purpose: "user_data" }),
    ).toMatchObject({ data: [], has_more: false });
    // Another owner's id is no cursor.
    const theirs = (await listFiles(opened.db, globex, { limit: 1, order: "asc" }))!.data[0]!.id;
    expect(await listFiles(opened.db, acme, { limit: 3, order: "asc", after: theirs })).toBeNull();
  });

  it("a deleted file's id still names its place, so deleting while paging visits every file", async () => {
    const opened = await store(engine);
    const base = Date.UTC(2026, 10, 25, 12);
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) {
      ids.push(await upload(opened, acme, Buffer.from(`${n}\n`), new Date(base + n * 1000)));
    }
    // The OpenAI clients' cleanup loop: each page's files deleted, then the next page
    // asked for after the last of them.
    const visited: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await listFiles(opened.db, acme, {
        limit: 2,
        order: "asc",
        ...(after ? { after } : {}),
      });
      expect(page).not.toBeNull();
      for (const file of page!.data) {
        visited.push(file.id);
        expect(await deleteFile(opened.db, acme, file.id)).toBe(true);
      }
      if (!page!.has_more) break;
      after = page!.last_id!;
    }
    expect(visited).toEqual(ids);
    expect((await listFiles(opened.db, acme, { limit: 10, order: "asc" }))!.data).toEqual([]);
    // Deleted as before: not found, chunks gone.
    expect(await findFile(opened.db, acme, ids[0]!)).toBeUndefined();
    expect(await deleteFile(opened.db, acme, ids[0]!)).toBe(false);
    expect(await opened.db.selectFrom("file_chunks").selectAll().execute()).toEqual([]);
  });

  it("a deleted file's id is a cursor for its owner only; an id never minted is none", async () => {
    const opened = await store(engine);
    const base = Date.UTC(2026, 10, 25, 12);
    const first = await upload(opened, acme, Buffer.from("a\n"), new Date(base));
    const gone = await upload(opened, acme, Buffer.from("b\n"), new Date(base + 1000));
    const last = await upload(opened, acme, Buffer.from("c\n"), new Date(base + 2000));
    await upload(opened, globex, Buffer.from("d\n"), new Date(base));
    expect(await deleteFile(opened.db, acme, gone)).toBe(true);
    const page = (after: string, owner: Owner = acme, order: "asc" | "desc" = "asc") =>
      listFiles(opened.db, owner, { limit: 10, order, after });
    expect((await page(gone))!.data.map((f) => f.id)).toEqual([last]);
    expect((await page(gone, acme, "desc"))!.data.map((f) => f.id)).toEqual([first]);
    // Another account's, or another project's, is a 404 as before, however it went.
    expect(await page(gone, globex)).toBeNull();
    expect(await page(gone, acmeWeb)).toBeNull();
    const theirs = await upload(opened, globex, Buffer.from("e\n"), new Date(base + 500));
    expect(await deleteFile(opened.db, globex, theirs)).toBe(true);
    expect(await page(theirs)).toBeNull();
    expect((await page(theirs, globex))!.data).toHaveLength(0);
    expect(await page("file-000000000000000000000000")).toBeNull();
    expect(await page("file-not-an-id\u0000")).toBeNull();
  });

  it("an expired file's id still pages on, before the sweep and after it", async () => {
    const opened = await store(engine);
    const base = Date.UTC(2026, 10, 25, 12);
    const past = new Date(Date.now() - 1000);
    const first = await upload(opened, acme, Buffer.from("a\n"), new Date(base));
    const expired = await upload(opened, acme, Buffer.from("b\n"), new Date(base + 1000), past);
    const last = await upload(opened, acme, Buffer.from("c\n"), new Date(base + 2000));
    const after = (order: "asc" | "desc", owner: Owner = acme) =>
      listFiles(opened.db, owner, { limit: 10, order, after: expired });
    expect(await findFile(opened.db, acme, expired)).toBeUndefined();
    expect((await after("asc"))!.data.map((f) => f.id)).toEqual([last]);
    expect((await after("desc"))!.data.map((f) => f.id)).toEqual([first]);
    expect(await after("asc", globex)).toBeNull();

    expect(await sweepExpiredFiles(opened.db)).toBe(1);
    expect((await after("asc"))!.data.map((f) => f.id)).toEqual([last]);
    expect((await after("desc"))!.data.map((f) => f.id)).toEqual([first]);
    expect(await after("asc", globex)).toBeNull();
  });

  it("a tombstone is swept a day after its file went, and only then", async () => {
    const opened = await store(engine);
    const fresh = await upload(opened, acme, Buffer.from("a\n"));
    const old = await upload(opened, acme, Buffer.from("b\n"));
    expect(await deleteFile(opened.db, acme, fresh)).toBe(true);
    expect(await deleteFile(opened.db, acme, old)).toBe(true);
    expect(await sweepFileTombstones(opened.db)).toBe(0);
    await opened.db
      .updateTable("file_tombstones")
      .set({ gone_at: new Date(Date.now() - 86_400_000 - 60_000) })
      .where("id", "=", old)
      .execute();
    expect(await sweepFileTombstones(opened.db)).toBe(1);
    const cursor = (after: string) => listFiles(opened.db, acme, { limit: 1, order: "asc", after });
    expect(await cursor(fresh)).not.toBeNull();
    expect(await cursor(old)).toBeNull();
  });
});
