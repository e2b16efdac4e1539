import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectStore, type StoreConnection } from "../../../gateway/store/connect.js";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";

/**
 * The PostgreSQL server stopped while the gateway's pool has queries in
 * flight: the queries fail (the outbox retries them), and nothing else
 * happens. A connection killed while checked out used to emit an "error"
 * nobody listened to, which ends a Node process: the gateway crashed in a
 * database outage under load instead of serving on.
 */
let server: PostgresServer;
let store: StoreConnection;
beforeAll(async () => {
  server = await startPostgresServer();
  store = await connectStore({ url: await server.createDatabase() });
});
afterAll(async () => {
  await store?.db.destroy();
  await server?.stop();
});

describe("the store's pool when its server stops under load", () => {
  it("fails the queries in flight, raises nothing uncaught, and works again once the server is back", async () => {
    const uncaught: unknown[] = [];
    const listener = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", listener);
    try {
      for (let round = 0; round < 3; round += 1) {
        let stop = false;
        let ok = 0;
        let failed = 0;
        const loops = Array.from({ length: 10 }, async () => {
          while (!stop) {
            await sql`SELECT pg_sleep(0.001)`.execute(store.db).then(
              () => (ok += 1),
              () => (failed += 1),
            );
          }
        });
        await new Promise((resolve) => setTimeout(resolve, 300));
        await server.halt();
        await new Promise((resolve) => setTimeout(resolve, 200));
        await server.resume();
        await new Promise((resolve) => setTimeout(resolve, 200));
        stop = true;
        await Promise.all(loops);
        expect(ok).toBeGreaterThan(0);
        expect(failed).toBeGreaterThan(0);
      }
      expect(uncaught.map(String)).toEqual([]);
      const { rows } = await sql<{ one: number }>`SELECT 1 AS one`.execute(store.db);
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      process.off("uncaughtException", listener);
    }
  });
});
