import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey } from "../../../gateway/auth/key-format.js";
import type { Database } from "../../../gateway/store/database.js";
import {
  fixtureFolder,
  startRuntime,
  type RunningRuntime,
} from "../../runtime/support/runtime-server.js";
import { freePort } from "../../support/free-port.js";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { GEN } from "../conformance/support.js";

/**
 * A gateway process SIGKILLed under load, its PostgreSQL up: once it runs
 * again on its state folder, the ledger holds every answered request, each
 * once. Only requests in flight at the kill (never answered) may add rows:
 * their records were journaled just before the answer that never left.
 */
const CLIENTS = 4;

let server: PostgresServer;
let runtime: RunningRuntime;
let dir: string;
beforeAll(async () => {
  server = await startPostgresServer();
  runtime = await startRuntime({ path: await fixtureFolder("tiny-gpt"), modelId: "tiny-gpt" });
  dir = await mkdtemp(join(tmpdir(), "ledger-crash-"));
});
afterAll(async () => {
  await runtime?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function startGateway(
  databaseUrl: string,
  keysFile: string,
): Promise<{ url: string; process: ServiceProcess }> {
  const port = await freePort();
  const metricsPort = await freePort();
  const process = await startServiceProcess({
    args: [
      "gateway",
      `--models-dir=${join(dir, "models")}`,
      `--keys-file=${keysFile}`,
      `--state-dir=${join(dir, "state")}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--metrics-port=${metricsPort}`,
      "--rate-limit-per-minute=1000000",
      "--rate-limit-burst=100000",
    ],
    env: { MODELGATE_DATABASE_URL: databaseUrl },
    readyUrl: `http://127.0.0.1:${metricsPort}/readyz`,
  });
  return { url: `http://127.0.0.1:${port}`, process };
}

describe("usage ledger across a SIGKILL of the gateway", () => {
  it("loses no answered request and doubles none", async () => {
    const databaseUrl = await server.createDatabase();
    const key = generateApiKey();
    const keysFile = join(dir, "keys.yaml");
    await writeFile(
      keysFile,
      `accounts:\n  - id: acme\nkeys:\n  - id: ${key.id}\n    hash: ${key.hash}\n    account: acme\n`,
    );
    await mkdir(join(dir, "models"), { recursive: true });
    await writeFile(
      join(dir, "models", "tiny-gpt.yaml"),
      `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: tiny-gpt\nspec:\n  task: text-generation\n  source: { uri: file:///models/x }\nstatus:\n  endpoint: ${runtime.url}\n`,
    );

    const first = await startGateway(databaseUrl, keysFile);
    const answered: string[] = [];
    let inFlight = 0;
    let stop = false;
    const client = async () => {
      while (!stop) {
        inFlight += 1;
        try {
          const res = await fetch(`${first.url}/v1/responses`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-api-key": key.key },
            body: JSON.stringify(GEN),
          });
          if (res.status === 200) answered.push(((await res.json()) as { id: string }).id);
        } catch {
          // The connection died with the gateway: never answered.
        } finally {
          inFlight -= 1;
        }
      }
    };
    const clients = Array.from({ length: CLIENTS }, client);
    // Under load for a while, then killed mid-stream.
    while (answered.length < 40) await new Promise((resolve) => setTimeout(resolve, 20));
    await first.process.kill();
    stop = true;
    await Promise.all(clients);
    expect(inFlight).toBe(0);

    const db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl }) }),
    });
    const atKill = await db.selectFrom("usage_ledger").select("response_id").execute();
    // For the record: how many answered requests only the journal held at the kill.
    console.log(
      `killed after ${answered.length} answers; ${answered.length - atKill.length} not yet in the ledger`,
    );
    const second = await startGateway(databaseUrl, keysFile);
    try {
      const deadline = Date.now() + 30_000;
      let ids: string[] = [];
      while (Date.now() < deadline) {
        ids = (await db.selectFrom("usage_ledger").select("response_id").execute()).map(
          (row) => row.response_id,
        );
        if (answered.every((id) => ids.includes(id))) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const missing = answered.filter((id) => !ids.includes(id));
      expect(missing).toEqual([]);
      // At most the requests in flight at the kill were journaled without an answer.
      expect(ids.length - answered.length).toBeGreaterThanOrEqual(0);
      expect(ids.length - answered.length).toBeLessThanOrEqual(CLIENTS);
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      await db.destroy();
      await second.process.stop();
    }
  });
});
