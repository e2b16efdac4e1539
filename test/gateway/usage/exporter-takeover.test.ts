import { rm } from "node:fs/promises";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GeneratedKey } from "../../../gateway/auth/key-format.js";
import type { Database } from "../../../gateway/store/database.js";
import {
  fixtureFolder,
  startRuntime,
  type RunningRuntime,
} from "../../runtime/support/runtime-server.js";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";
import { GEN } from "../conformance/support.js";
import { startCountingSink, type CountingSink } from "../outbox/sink-server.js";
import {
  gatewayFolder,
  startExporterGateway,
  until,
  type ExporterGateway,
  type GatewayFolder,
} from "./exporter-gateways.js";

/**
 * Two gateway processes on one PostgreSQL server and one usage sink: one of
 * them exports the ledger; SIGKILLed under load, the other takes over; the
 * killed one, started again on its state folder, ships what its journal
 * held. In the end every answered request reached the sink.
 */
let server: PostgresServer;
let runtime: RunningRuntime;
let sink: CountingSink;
let folder: GatewayFolder;
let key: GeneratedKey;

beforeAll(async () => {
  server = await startPostgresServer();
  runtime = await startRuntime({ path: await fixtureFolder("tiny-gpt"), modelId: "tiny-gpt" });
  sink = await startCountingSink();
  folder = await gatewayFolder("exporter-takeover-", runtime.url);
  key = folder.key;
});
afterAll(async () => {
  await runtime?.close();
  await sink?.close();
  await server?.stop();
  if (folder) await rm(folder.dir, { recursive: true, force: true });
});

type Gateway = ExporterGateway;

const startGateway = (name: string, databaseUrl: string): Promise<Gateway> =>
  startExporterGateway(folder, name, sink.url, databaseUrl);

const isExporting = (gateway: Gateway) =>
  gateway.process.logs.some((line) => line.includes("usage exporter: this replica exports"));

async function metric(gateway: Gateway, name: string): Promise<number> {
  const text = await (await fetch(`${gateway.opsUrl}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
}

describe("the usage exporter across gateway processes", () => {
  it("one exports; SIGKILLed under load, the other takes over; every answered request reaches the sink", async () => {
    const databaseUrl = await server.createDatabase();
    const a = await startGateway("a", databaseUrl);
    const b = await startGateway("b", databaseUrl);
    const gateways = [a, b];
    await until("one gateway to export", () => gateways.some(isExporting));
    const holder = isExporting(a) ? a : b;
    const other = holder === a ? b : a;
    expect(isExporting(other)).toBe(false);

    const answered: string[] = [];
    let stop = false;
    const client = async (gateway: Gateway) => {
      while (!stop) {
        try {
          const res = await fetch(`${gateway.url}/v1/responses`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-api-key": key.key },
            body: JSON.stringify(GEN),
          });
          if (res.status === 200) answered.push(((await res.json()) as { id: string }).id);
        } catch {
          // The connection died with the gateway: never answered.
          if (gateway === holder) return;
        }
      }
    };
    const clients = [client(a), client(b), client(a), client(b)];
    while (answered.length < 60) await new Promise((resolve) => setTimeout(resolve, 20));
    await holder.process.kill();
    await until("the other gateway to take over", () => isExporting(other));
    const afterKill = answered.length;
    while (answered.length < afterKill + 30)
      await new Promise((resolve) => setTimeout(resolve, 20));
    stop = true;
    await Promise.all(clients);

    // The killed gateway, started again on its folder, ships its journal to
    // the ledger; the other exports it.
    const again = await startGateway(holder.name, databaseUrl);
    try {
      await until("every answered request at the sink", () =>
        answered.every((id) => sink.counted.has(id)),
      );
      const db = new Kysely<Database>({
        dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl }) }),
      });
      try {
        const rows = await db.selectFrom("usage_ledger").select("response_id").execute();
        // The sink holds the ledger's rows, each counted once; a batch in
        // flight at the kill may have arrived twice (at least once).
        await until("the ledger's rows at the sink", () =>
          rows.every((row) => sink.counted.has(row.response_id)),
        );
        expect(sink.counted.size).toBe(rows.length);
        const repeats = sink.attempts.length - new Set(sink.attempts).size;
        expect(repeats).toBeLessThanOrEqual(100);
        console.log(
          `answered ${answered.length}, ledger ${rows.length}, sink ${sink.counted.size}, delivered twice ${repeats}`,
        );
      } finally {
        await db.destroy();
      }
      expect(isExporting(again)).toBe(false);
      expect(await metric(again, "modelgate_usage_exporter_leading")).toBe(0);
      expect(await metric(other, "modelgate_usage_exporter_leading")).toBe(1);
      expect(await metric(other, "modelgate_usage_exported_records_total")).toBeGreaterThan(0);
    } finally {
      await Promise.all([again.process.stop(), other.process.stop()]);
    }
  }, 120_000);
});
