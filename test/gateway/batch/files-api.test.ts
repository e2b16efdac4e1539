import { connect } from "node:net";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGateway } from "../../../gateway/app.js";
import { RequestLineCounter } from "../../../gateway/batch/files.routes.js";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * The Files API driven with the official `openai` client, as users drive it,
 * on a listening gateway whose store is the embedded PGlite.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform({ withoutPayments: true });
});
afterAll(async () => p?.close());

const openaiClient = (url: string, key: string) =>
  new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 });

const client = (key: string, project?: string) =>
  new OpenAI({
    apiKey: key,
    baseURL: `${p.url}/v1`,
    maxRetries: 0,
    ...(project ? { defaultHeaders: { "x-project-id": project } } : {}),
  });

const jsonl = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: "POST",
      url: "/v1/responses",
      body: { model: "tiny-gpt", input: `hi ${i}` },
    }),
  ).join("\n") + "\n";

/**
 * An upload sent as the Python client (httpx) sends it: the whole body is
 * written before the answer is read. Resolves with the status and body, and
 * the seconds the body took to be taken in.
 */
function uploadWholeBodyFirst(
  url: string,
  key: string,
  purpose: string,
  fileBytes: number,
): Promise<{ status: number; body: string; bodySentSeconds: number }> {
  const boundary = "----modelgate-test-boundary";
  const head = Buffer.from(
    `--${boundary}\r\ncontent-disposition: form-data; name="purpose"\r\n\r\n${purpose}\r\n` +
      `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="in.jsonl"\r\n` +
      "content-type: application/octet-stream\r\n\r\n",
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const body = Buffer.concat([head, Buffer.alloc(fileBytes, "{}\n"), tail]);
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let bodySentSeconds = -1;
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on("error", reject);
    socket.on("data", (data: Buffer) => {
      chunks.push(data);
      const text = Buffer.concat(chunks).toString();
      const end = text.indexOf("\r\n\r\n");
      const length = /content-length: (\d+)/i.exec(text)?.[1];
      if (end === -1 || length === undefined || bodySentSeconds < 0) return;
      if (Buffer.byteLength(text) < end + 4 + Number(length)) return;
      socket.destroy();
      resolve({
        status: Number(text.slice(9, 12)),
        body: text.slice(end + 4),
        bodySentSeconds,
      });
    });
    socket.write(
      `POST /v1/files HTTP/1.1\r\nhost: ${hostname}:${port}\r\nx-api-key: ${key}\r\n` +
        `content-type: multipart/form-data; boundary=${boundary}\r\n` +
        `content-length: ${body.length}\r\n\r\n`,
    );
    socket.write(body, () => {
      bodySentSeconds = (Date.now() - started) / 1000;
      socket.emit("data", Buffer.alloc(0));
    });
  });
}

describe("the Files API with the openai client", () => {
  it("creates, retrieves, reads, lists and deletes a file", async () => {
    const openai = client(p.keys.acme.key);
    const text = jsonl(3);
    const created = await openai.files.create({
      file: await toFile(Buffer.from(text), "in.jsonl"),
      purpose: "batch",
    });
    expect(created).toMatchObject({
      object: "file",
      bytes: Buffer.byteLength(text),
      filename: "in.jsonl",
      purpose: "batch",
    });
    // A batch file expires after thirty days unless asked otherwise, as OpenAI's do.
    expect(created.expires_at! - created.created_at).toBe(2_592_000);
    expect(created.id).toMatch(/^file-[0-9a-f]{24}$/);
    expect(Math.abs(created.created_at - Date.now() / 1000)).toBeLessThan(30);

    expect(await openai.files.retrieve(created.id)).toEqual(created);
    const content = await openai.files.content(created.id);
    expect(await content.text()).toBe(text);

    const listed: string[] = [];
    for await (const file of openai.files.list({ limit: 1 })) listed.push(file.id);
    expect(listed).toContain(created.id);

    expect(await openai.files.delete(created.id)).toEqual({
      id: created.id,
      object: "file",
      deleted: true,
    });
    await expect(openai.files.retrieve(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("the clients' loop deleting each listed file visits all of them and leaves none", async () => {
    // A project of its own: no other test's files in its listing.
    const openai = client(p.keys.acme.key, "batch");
    const created: string[] = [];
    for (let n = 0; n < 5; n++) {
      const file = await openai.files.create({
        file: await toFile(Buffer.from(`${n}\n`), `${n}.txt`),
        purpose: "user_data",
      });
      created.push(file.id);
    }
    // The next page is asked for after the last file of this one, which the loop has
    // just deleted.
    const visited: string[] = [];
    for await (const file of openai.files.list({ limit: 2 })) {
      visited.push(file.id);
      await openai.files.delete(file.id);
    }
    expect([...visited].sort()).toEqual([...created].sort());
    expect((await openai.files.list()).data).toEqual([]);
    await expect(openai.files.retrieve(created[0]!)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(openai.files.content(created[0]!)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(openai.files.delete(created[0]!)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("a deleted file's id pages on for its owner; another's, or one never minted, is a 404 naming after", async () => {
    const acme = client(p.keys.acme.key, "batch");
    const globex = client(p.keys.limited.key);
    const mine = await acme.files.create({
      file: await toFile(Buffer.from("x\n"), "x.txt"),
      purpose: "user_data",
    });
    const theirs = await globex.files.create({
      file: await toFile(Buffer.from("y\n"), "y.txt"),
      purpose: "user_data",
    });
    await acme.files.delete(mine.id);
    await globex.files.delete(theirs.id);
    expect(await acme.files.list({ after: mine.id })).toMatchObject({ data: [] });
    const never = "file-000000000000000000000000";
    for (const [openai, after] of [
      [acme, theirs.id],
      [globex, mine.id],
      [client(p.keys.acme.key), mine.id],
      [acme, never],
    ] as const) {
      const refused = await openai.files.list({ after }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(OpenAI.NotFoundError);
      expect(refused).toMatchObject({ status: 404, code: "file_not_found", param: "after" });
      // Nothing tells another owner's deleted id from one never minted.
      expect((refused as Error).message.replace(after, "ID")).toBe("404 No such File object: ID");
    }
  });

  it("another account's or project's file is a 404 like a missing one", async () => {
    const mine = await client(p.keys.acme.key).files.create({
      file: await toFile(Buffer.from("x\n"), "a.txt"),
      purpose: "user_data",
    });
    const globex = client(p.keys.limited.key);
    const theirs = await globex.files.retrieve(mine.id).catch((e: unknown) => e);
    const missing = await globex.files
      .retrieve("file-000000000000000000000000")
      .catch((e: unknown) => e);
    expect(theirs).toBeInstanceOf(OpenAI.NotFoundError);
    expect(theirs).toMatchObject({ status: 404, code: "file_not_found", param: "file_id" });
    expect((theirs as Error).message.replace(mine.id, "ID")).toBe(
      (missing as Error).message.replace("file-000000000000000000000000", "ID"),
    );
    await expect(globex.files.content(mine.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(globex.files.delete(mine.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client(p.keys.acme.key, "web").files.retrieve(mine.id)).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
    const theirList: string[] = [];
    for await (const file of globex.files.list()) theirList.push(file.id);
    expect(theirList).not.toContain(mine.id);
    expect(await client(p.keys.acme.key).files.retrieve(mine.id)).toMatchObject({ id: mine.id });
  });

  it("refuses a batch file over 50,000 lines with a 400 naming the limit, and keeps nothing", async () => {
    const db = await p.components.store.db();
    const before = await db.selectFrom("files").select("id").execute();
    const error = await client(p.keys.acme.key)
      .files.create({
        file: await toFile(Buffer.from("{}\n".repeat(50_001)), "big.jsonl"),
        purpose: "batch",
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, code: "too_many_lines", param: "file" });
    expect((error as Error).message).toContain("50000");
    expect(await db.selectFrom("files").select("id").execute()).toEqual(before);
    // Exactly at the limit is accepted; other purposes have no line limit.
    const at = await client(p.keys.acme.key).files.create({
      file: await toFile(Buffer.from("{}\n".repeat(50_000)), "ok.jsonl"),
      purpose: "batch",
    });
    expect(at.bytes).toBe(150_000);
    // Blank lines are not requests, as validation skips them: 50,000 requests
    // with blank lines after them (an editor's last line break) are accepted.
    const blanks = await client(p.keys.acme.key).files.create({
      file: await toFile(Buffer.from("{}\n".repeat(50_000) + "\n \r\n\t\n"), "blank.jsonl"),
      purpose: "batch",
    });
    expect(blanks.bytes).toBe(150_006);
  });

  it("counts the requests of an upload however its bytes are split", () => {
    const text = Buffer.from('{"a":1}\n\n  \r\n{"b":2}\r\n\t{"c":3}\n \n{"d":4}');
    for (const size of [1, 2, 3, 5, text.length]) {
      const counter = new RequestLineCounter();
      for (let at = 0; at < text.length; at += size) counter.push(text.subarray(at, at + size));
      expect(counter.end(), `pieces of ${size}`).toBe(4);
    }
    const blank = new RequestLineCounter();
    blank.push(Buffer.from("\n \n\r\n"));
    expect(blank.end()).toBe(0);
  });

  it("refuses an upload over the byte limit with a 413 naming it, keeping no chunk of it", async () => {
    // The same components behind a gateway with a limit of 1.5 MiB (200 MB in production):
    // the refused upload has written its first 1 MiB chunk by then.
    const limit = 1.5 * 1024 * 1024;
    const small = buildGateway({
      ...p.components.deps,
      fileLimits: { bytes: limit, batchLines: 10 },
    });
    const url = await small.listen({ host: "127.0.0.1", port: 0 });
    try {
      const db = await p.components.store.db();
      const count = async (table: "files" | "file_chunks") =>
        Number(
          (
            await db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll<string>().as("n"))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const before = { files: await count("files"), chunks: await count("file_chunks") };
      const error = await openaiClient(url, p.keys.acme.key)
        .files.create({
          file: await toFile(Buffer.alloc(3 * 1024 * 1024, 97), "big.bin"),
          purpose: "user_data",
        })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ status: 413, code: "file_too_large", param: "file" });
      expect((error as Error).message).toContain(String(limit));
      expect({ files: await count("files"), chunks: await count("file_chunks") }).toEqual(before);
      // The line limit is the one set too.
      const lines = await openaiClient(url, p.keys.acme.key)
        .files.create({
          file: await toFile(Buffer.from("{}\n".repeat(11)), "b.jsonl"),
          purpose: "batch",
        })
        .catch((e: unknown) => e);
      expect(lines).toMatchObject({ status: 400, code: "too_many_lines" });
    } finally {
      await small.close();
    }
  });

  it("refuses what is not a form, a missing purpose and an unknown one, naming the field", async () => {
    const headers = { "x-api-key": p.keys.acme.key };
    const json = await fetch(`${p.url}/v1/files`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: "{}",
    });
    expect(json.status).toBe(400);
    expect(await json.json()).toMatchObject({
      error: { param: "file", type: "invalid_request_error" },
    });
    const noPurpose = new FormData();
    noPurpose.append("file", new Blob(["a\n"]), "a.txt");
    const r1 = await fetch(`${p.url}/v1/files`, { method: "POST", headers, body: noPurpose });
    expect(r1.status).toBe(400);
    expect(await r1.json()).toMatchObject({ error: { param: "purpose" } });
    const badPurpose = new FormData();
    badPurpose.append("purpose", "fine-tune");
    badPurpose.append("file", new Blob(["a\n"]), "a.txt");
    const r2 = await fetch(`${p.url}/v1/files`, { method: "POST", headers, body: badPurpose });
    expect(r2.status).toBe(400);
    expect(await r2.json()).toMatchObject({ error: { param: "purpose" } });
    const unauthenticated = await fetch(`${p.url}/v1/files`);
    expect(unauthenticated.status).toBe(401);
    // A listing's bad query is named as every listing names it.
    for (const path of ["/v1/files?limit=0", "/v1/batches?limit=101", "/v1/files?order=up"]) {
      const res = await fetch(`${p.url}${path}`, { headers });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        error: { code: "invalid_query", param: path.includes("order") ? "order" : "limit" },
      });
    }
    // A parameter given twice is named as given twice, not read as a wrong value.
    for (const [path, param] of [
      ["/v1/files?limit=1&limit=2", "limit"],
      ["/v1/batches?after=a&after=b", "after"],
    ] as const) {
      const res = await fetch(`${p.url}${path}`, { headers });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        error: { code: "invalid_query", param, message: `'${param}' is given more than once.` },
      });
    }
  });

  it("reads the rest of an upload refused for its purpose, so a client sending it all first gets the 400", async () => {
    // The Python client writes its whole body before it reads: the gateway
    // once stopped reading at the bad purpose, and that client waited for the
    // 65 s keep-alive timeout to close the connection before it saw the 400.
    const refused = await uploadWholeBodyFirst(p.url, p.keys.acme.key, "fine-tune", 16 << 20);
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toMatchObject({
      error: { param: "purpose", code: "invalid_request" },
    });
    expect(refused.bodySentSeconds).toBeLessThan(20);
    // A good upload sent the same way is answered as before.
    const ok = await uploadWholeBodyFirst(p.url, p.keys.acme.key, "user_data", 1 << 20);
    expect(ok.status).toBe(200);
  }, 90_000);

  it("refuses a field the form does not have, naming it, and keeps nothing", async () => {
    const headers = { "x-api-key": p.keys.acme.key };
    const before = await client(p.keys.acme.key).files.list();
    const body = new FormData();
    body.append("purpose", "batch");
    // A misspelt expires_after[seconds]: ignored, the file would be kept for thirty days.
    body.append("expires_after[second]", "3600");
    body.append("file", new Blob([jsonl(1)]), "in.jsonl");
    const res = await fetch(`${p.url}/v1/files`, { method: "POST", headers, body });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { type: "invalid_request_error", param: "expires_after[second]" },
    });
    const after = await client(p.keys.acme.key).files.list();
    expect(after.data.map((f) => f.id)).toEqual(before.data.map((f) => f.id));
  });

  it("refuses 'file' sent as a text field, saying it must be a file, and keeps nothing", async () => {
    const headers = { "x-api-key": p.keys.acme.key };
    const before = await client(p.keys.acme.key).files.list();
    const body = new FormData();
    body.append("purpose", "batch");
    // A part without a filename is a text field to a multipart reader.
    body.append("file", jsonl(1));
    const res = await fetch(`${p.url}/v1/files`, { method: "POST", headers, body });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { param: string; message: string } };
    expect(error).toMatchObject({ type: "invalid_request_error", param: "file" });
    expect(error.message).toMatch(/^'file' must be a file/);
    const after = await client(p.keys.acme.key).files.list();
    expect(after.data.map((f) => f.id)).toEqual(before.data.map((f) => f.id));
  });

  it.each([
    ["purpose", "batch", "user_data"],
    ["expires_after[seconds]", "3600", "7200"],
    ["expires_after[anchor]", "created_at", "created_at"],
  ])("refuses %s sent twice, naming it, and keeps nothing", async (field, first, second) => {
    const headers = { "x-api-key": p.keys.acme.key };
    const before = await client(p.keys.acme.key).files.list();
    const body = new FormData();
    if (field !== "purpose") body.append("purpose", "batch");
    body.append(field, first);
    body.append(field, second);
    body.append("file", new Blob([jsonl(1)]), "in.jsonl");
    const res = await fetch(`${p.url}/v1/files`, { method: "POST", headers, body });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { type: "invalid_request_error", param: field },
    });
    const after = await client(p.keys.acme.key).files.list();
    expect(after.data.map((f) => f.id)).toEqual(before.data.map((f) => f.id));
  });

  it("sets expires_at from expires_after, keeps user_data until deleted, and names a bad field", async () => {
    const openai = client(p.keys.acme.key);
    const hour = await openai.files.create({
      file: await toFile(Buffer.from(jsonl(1)), "in.jsonl"),
      purpose: "batch",
      expires_after: { anchor: "created_at", seconds: 3600 },
    });
    expect(hour.expires_at! - hour.created_at).toBe(3600);
    expect((await openai.files.retrieve(hour.id)).expires_at).toBe(hour.expires_at);
    const kept = await openai.files.create({
      file: await toFile(Buffer.from("notes\n"), "notes.txt"),
      purpose: "user_data",
    });
    expect(kept.expires_at).toBeNull();
    // created_at is the only anchor: seconds alone are enough.
    const form = new FormData();
    form.append("purpose", "user_data");
    form.append("expires_after[seconds]", "7200");
    form.append("file", new Blob(["x\n"]), "x.txt");
    const secondsOnly = (await (
      await fetch(`${p.url}/v1/files`, {
        method: "POST",
        headers: { "x-api-key": p.keys.acme.key },
        body: form,
      })
    ).json()) as { created_at: number; expires_at: number };
    expect(secondsOnly.expires_at - secondsOnly.created_at).toBe(7200);

    const refused = async (fields: Record<string, string>) => {
      const form = new FormData();
      form.append("purpose", "batch");
      for (const [name, value] of Object.entries(fields)) form.append(name, value);
      form.append("file", new Blob([jsonl(1)]), "in.jsonl");
      const res = await fetch(`${p.url}/v1/files`, {
        method: "POST",
        headers: { "x-api-key": p.keys.acme.key },
        body: form,
      });
      return { status: res.status, error: ((await res.json()) as { error: object }).error };
    };
    const listedIds = async () => {
      const ids: string[] = [];
      for await (const file of openai.files.list({ limit: 100 })) ids.push(file.id);
      return ids;
    };
    const before = await listedIds();
    expect(before.length).toBeGreaterThanOrEqual(3);
    for (const seconds of ["3599", "2592001", "1.5", "soon"]) {
      expect(
        await refused({ "expires_after[anchor]": "created_at", "expires_after[seconds]": seconds }),
      ).toMatchObject({ status: 400, error: { param: "expires_after[seconds]" } });
    }
    expect(await refused({ "expires_after[anchor]": "last_active_at" })).toMatchObject({
      status: 400,
      error: { param: "expires_after[anchor]" },
    });
    // Refused uploads keep nothing: the owner lists what it listed before them.
    expect(await listedIds()).toEqual(before);
  });
});
