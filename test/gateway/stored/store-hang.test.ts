import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { timedAnswer } from "../support/timed-answer.js";

/**
 * Reads of stored responses while PostgreSQL hangs (every process stopped,
 * its port still accepting): a caller gets a 503 with Retry-After within
 * the read's deadline, and at once while the store is known down, instead of
 * waiting out the pool's connect or query timeout (10 and 30 s) on every
 * read. Once the server runs again the store is back without any traffic.
 */
let postgres: PostgresServer;
let p: Platform;
beforeAll(async () => {
  postgres = await startPostgresServer();
  p = await startPlatform({ config: { databaseUrl: await postgres.createDatabase() } });
});
afterAll(async () => {
  postgres?.thaw();
  await p?.close();
  await postgres?.stop();
});

const ASK = { model: "tiny-gpt", input: "Hello there", max_output_tokens: 2, temperature: 0 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("stored responses while the database hangs", () => {
  it("answer 503 within the read deadline, then at once, and come back without traffic", async () => {
    const made = await p.api(ASK);
    const { id } = (await made.json()) as { id: string };
    const read = () =>
      fetch(`${p.url}/v1/responses/${id}`, { headers: { "x-api-key": p.keys.acme.key } });
    expect((await timedAnswer(read)).status).toBe(200);

    postgres.freeze();
    try {
      const first = await timedAnswer(read);
      expect(first).toMatchObject({ status: 503, code: "store_unavailable", retryAfter: "1" });
      // The read's deadline is 5 s; the pool alone held it 10 to 30 s.
      expect(first.ms).toBeLessThan(8_000);
      // Known down: the next reads, and a continuation, do not wait at all.
      const again = await timedAnswer(read);
      expect(again).toMatchObject({ status: 503, code: "store_unavailable" });
      expect(again.ms).toBeLessThan(1_000);
      const continued = await timedAnswer(() => p.api({ ...ASK, previous_response_id: id }));
      expect(continued).toMatchObject({ status: 503, code: "store_unavailable" });
      expect(continued.ms).toBeLessThan(1_000);
      expect(p.components.store.down).toBe(true);
    } finally {
      postgres.thaw();
    }
    // No request comes: the store's own probe finds it back.
    const deadline = Date.now() + 10_000;
    while (p.components.store.down && Date.now() < deadline) await sleep(50);
    expect(p.components.store.down).toBe(false);
    expect((await timedAnswer(read)).status).toBe(200);
  }, 60_000);
});
