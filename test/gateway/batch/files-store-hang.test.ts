import { toFile } from "openai";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { timedAnswer } from "../support/timed-answer.js";
import { gptLine, jsonlOf, openaiClient } from "./support.js";

/**
 * The Files, Batch and usage routes while PostgreSQL hangs (every process
 * stopped, its port still accepting), as stored responses
 * (store-hang.test.ts): a read is a 503 with Retry-After within the read
 * deadline, then every call at once while the store is known down, instead
 * of waiting out the pool's connect or query timeout (10 and 30 s). Once the
 * server runs again the store is back without any traffic. A usage page has
 * no deadline, only the refusal while the store is known down: its
 * aggregation may outlast the deadline on a database that is fine.
 */
let postgres: PostgresServer;
let p: Platform;
let databaseUrl: string;
beforeAll(async () => {
  postgres = await startPostgresServer();
  databaseUrl = await postgres.createDatabase();
  p = await startPlatform({
    withoutPayments: true,
    // No worker: it would poll the frozen store too, and the batch stays put.
    config: { databaseUrl, batchWorkers: 0 },
  });
});
afterAll(async () => {
  postgres?.thaw();
  await p?.close();
  await postgres?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function timed(path: string, method = "GET", form?: FormData) {
  return timedAnswer(() =>
    fetch(`${p.url}${path}`, {
      method,
      headers: { "x-api-key": p.keys.acme.key },
      ...(form ? { body: form } : {}),
    }),
  );
}

/** The usage endpoints' reads: their own 503 code, and their own Retry-After. */
const USAGE_READS = ["/v1/organization/usage/completions", "/v1/organization/costs"].map(
  (path) => `${path}?start_time=${Math.floor(Date.now() / 1000) - 86_400}`,
);

describe("Files, Batches and usage while the database hangs", () => {
  it("answer 503 within the read deadline, then at once, and come back without traffic", async () => {
    const client = openaiClient(p.url, p.keys.acme.key);
    const file = await client.files.create({
      file: await toFile(jsonlOf([gptLine(1)]), "input.jsonl"),
      purpose: "batch",
    });
    const batch = await client.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/responses",
      completion_window: "24h",
    });
    const fileRead = `/v1/files/${file.id}`;
    const batchRead = `/v1/batches/${batch.id}`;
    expect((await timed(fileRead)).status).toBe(200);
    expect((await timed(batchRead)).status).toBe(200);
    for (const usage of USAGE_READS) expect((await timed(usage)).status).toBe(200);

    postgres.freeze();
    try {
      // All before the store is known down: each reaches its own deadline.
      // The upload's rows are still `uploading` (no caller sees them), so it
      // has the read's deadline too; what it left is never listed.
      const form = new FormData();
      form.append("purpose", "user_data");
      form.append("file", new Blob(["left behind"]), "left.txt");
      const first = await Promise.all([
        timed(fileRead),
        timed(batchRead),
        timed("/v1/files", "POST", form),
      ]);
      for (const read of first) {
        expect(read).toMatchObject({ status: 503, code: "store_unavailable", retryAfter: "1" });
        // The read's deadline is 5 s; the pool alone held it 10 to 30 s.
        expect(read.ms).toBeLessThan(8_000);
      }
      expect(p.components.store.down).toBe(true);
      // Known down: every call that touches the store is refused at once,
      // the writes before they start.
      for (const [path, method] of [
        [fileRead],
        [batchRead],
        ["/v1/files"],
        [`${fileRead}/content`],
        ["/v1/batches"],
        [fileRead, "DELETE"],
        [`${batchRead}/cancel`, "POST"],
      ] as const) {
        const again = await timed(path, method);
        expect(again, `${method ?? "GET"} ${path}`).toMatchObject({
          status: 503,
          code: "store_unavailable",
          retryAfter: "1",
        });
        expect(again.ms).toBeLessThan(1_000);
      }
      // A usage read has no deadline of its own (a slow aggregation on a
      // live database is still an answer), but it is not sent to a store
      // known down either: its own 503 at once.
      for (const usage of USAGE_READS) {
        const again = await timed(usage);
        expect(again, usage).toMatchObject({
          status: 503,
          code: "usage_unavailable",
          retryAfter: "5",
        });
        expect(again.ms).toBeLessThan(1_000);
      }
    } finally {
      postgres.thaw();
    }
    // No request comes: the store's own probe finds it back.
    const deadline = Date.now() + 10_000;
    while (p.components.store.down && Date.now() < deadline) await sleep(50);
    expect(p.components.store.down).toBe(false);
    expect((await timed(fileRead)).status).toBe(200);
    expect((await timed(batchRead)).status).toBe(200);
    expect((await timed(`${fileRead}/content`)).status).toBe(200);
    for (const usage of USAGE_READS) expect((await timed(usage)).status).toBe(200);
    expect((await client.files.list()).data.map((listed) => listed.id)).toEqual([file.id]);
  }, 90_000);

  it("waits for a usage read that is slow on a live database, and leaves the store up", async () => {
    expect((await timed(USAGE_READS[0]!)).status).toBe(200);
    // The database answers; only the ledger is busy for longer than the read
    // deadline (a lock held 7 s, as a long maintenance statement would).
    const other = new pg.Client({ connectionString: databaseUrl });
    await other.connect();
    try {
      await other.query("BEGIN");
      await other.query("LOCK TABLE usage_ledger IN ACCESS EXCLUSIVE MODE");
      const release = sleep(7_000).then(() => other.query("ROLLBACK"));
      const usage = await timed(USAGE_READS[0]!);
      await release;
      expect(usage.status).toBe(200);
      expect(usage.ms).toBeGreaterThan(5_000);
      expect(p.components.store.down).toBe(false);
      expect((await timed("/v1/files")).status).toBe(200);
    } finally {
      await other.end();
    }
  }, 60_000);
});
