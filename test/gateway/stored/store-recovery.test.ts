import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * Stored responses around a PostgreSQL outage: while the database is known
 * to be down an answer goes out unstored (stored-responses.md), and once the
 * server is back the next answers are stored again within about a second.
 * The store used to be marked up again only by the usage outbox's next
 * delivery, whose backoff had grown during the outage: every `store: true`
 * answer for seconds after the server was back (up to a minute after a long
 * outage) went out unstored, and its id answered 404 on every replica.
 */
let postgres: PostgresServer;
let p: Platform;
beforeAll(async () => {
  postgres = await startPostgresServer();
  p = await startPlatform({ config: { databaseUrl: await postgres.createDatabase() } });
});
afterAll(async () => {
  await p?.close();
  await postgres?.stop();
});

const ASK = { model: "tiny-gpt", input: "Hello there", max_output_tokens: 2, temperature: 0 };

async function storedAnswer(): Promise<{ id: string; status: number }> {
  const res = await p.api({ ...ASK, store: true });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  const read = await fetch(`${p.url}/v1/responses/${id}`, {
    headers: { "x-api-key": p.keys.acme.key },
  });
  await read.body?.cancel();
  return { id, status: read.status };
}

/** The usage outbox's failed deliveries so far, from the gateway's log. */
function usageDeliveryFailures(): number {
  return p.logLines.filter((line) => {
    const entry = JSON.parse(line) as { msg?: string; journal?: string };
    return entry.msg === "outbox delivery failed; will retry" && /usage/.test(entry.journal ?? "");
  }).length;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("stored responses after a database outage", () => {
  it("are stored again within seconds of the server coming back, not at the outbox's next delivery", async () => {
    expect((await storedAnswer()).status).toBe(200);

    await postgres.halt();
    // An answer during the outage: its usage waits in the journal, and the
    // ledger's failed delivery marks the store down.
    expect((await p.api(ASK)).status).toBe(200);
    // The server comes back just after the usage outbox's sixth failed
    // delivery: its next attempt is at least 8 s away (half of 0.5 s × 2^5,
    // components.ts), so what stores the next answers is not that delivery.
    const deadline = Date.now() + 30_000;
    while (usageDeliveryFailures() < 6 && Date.now() < deadline) await sleep(20);
    expect(p.components.store.down).toBe(true);
    await postgres.resume();
    const back = Date.now();

    let last = { id: "", status: 0 };
    while (Date.now() - back < 3_000) {
      // Served all along; stored once the gateway sees the server again.
      const answer = await storedAnswer().catch(() => ({ id: "", status: 0 }));
      last = answer;
      if (answer.status === 200) break;
      await sleep(100);
    }
    expect(last.status, `still unstored ${Date.now() - back} ms after the server was back`).toBe(
      200,
    );
  }, 40_000);
});
