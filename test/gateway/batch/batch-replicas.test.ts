import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey, type GeneratedKey } from "../../../gateway/auth/key-format.js";
import { openStore, type Store } from "../../../gateway/store/store.js";
import {
  fixtureFolder,
  startRuntime,
  type RunningRuntime,
} from "../../runtime/support/runtime-server.js";
import { freePort } from "../../support/free-port.js";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { finished, linesOf, nliLine, openaiClient, submit, waitFor } from "./support.js";

/**
 * Batch work shared by real `modelgate gateway` processes on one PostgreSQL
 * server: a gateway SIGKILLed in the middle of a batch loses nothing (its
 * leases expire and another takes the lines), and a batch survives the
 * death of every gateway and resumes in the next one. Each custom_id ends
 * with exactly one result line, and exactly one ledger row per completed line.
 */
let pg: PostgresServer;
let databaseUrl: string;
let runtime: RunningRuntime;
let dir: string;
let key: GeneratedKey;
let store: Store;
const gateways: ServiceProcess[] = [];

async function startGateway(): Promise<{ url: string; process: ServiceProcess }> {
  const port = await freePort();
  const metricsPort = await freePort();
  const state = await mkdtemp(join(dir, "state-"));
  const process = await startServiceProcess({
    args: [
      "gateway",
      "--registry=file",
      `--models-dir=${join(dir, "models")}`,
      `--keys-file=${join(dir, "keys.yaml")}`,
      `--state-dir=${state}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--metrics-port=${metricsPort}`,
      "--batch-workers=2",
      "--batch-lease-seconds=2",
      "--batch-poll-ms=50",
    ],
    env: { MODELGATE_DATABASE_URL: databaseUrl },
    readyUrl: `http://127.0.0.1:${metricsPort}/readyz`,
  });
  gateways.push(process);
  return { url: `http://127.0.0.1:${port}`, process };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "batch-replicas-"));
  pg = await startPostgresServer();
  databaseUrl = await pg.createDatabase();
  runtime = await startRuntime({ path: await fixtureFolder("tiny-nli"), modelId: "tiny-nli" });
  key = generateApiKey();
  await writeFile(
    join(dir, "keys.yaml"),
    `accounts:\n  - id: acme\nkeys:\n  - id: ${key.id}\n    hash: ${key.hash}\n    account: acme\n`,
  );
  await mkdir(join(dir, "models"));
  await writeFile(
    join(dir, "models", "models.yaml"),
    `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: tiny-nli\nspec:\n  task: zero-shot-classification\n  source: { uri: file:///models/x }\n  pricing: { serviceSlug: tiny-nli, inputPerMillionTokens: '4' }\nstatus:\n  endpoint: ${runtime.url}\n`,
  );
  store = await openStore({ url: databaseUrl });
}, 120_000);

afterAll(async () => {
  for (const gateway of gateways) await gateway.kill();
  await store?.close();
  await runtime?.close();
  await pg?.stop();
});

/** Every custom_id once across the output and error files, and one ledger row per completed line. */
async function expectExactlyOnce(
  client: ReturnType<typeof openaiClient>,
  batchId: string,
  total: number,
) {
  const done = await waitFor(client, batchId, finished, 120_000);
  expect(done.status).toBe("completed");
  expect(done.request_counts).toEqual({ total, completed: total, failed: 0 });
  const output = await linesOf(client, done.output_file_id);
  expect(output).toHaveLength(total);
  expect(new Set(output.map((line) => line.custom_id)).size).toBe(total);
  const ledger = await store.db
    .selectFrom("usage_ledger")
    .select(["request_id", "cost"])
    .where("route", "=", "/v1/batches")
    .where(
      "request_id",
      "in",
      output.map((line) => line.response!.request_id),
    )
    .execute();
  expect(ledger).toHaveLength(total);
  // Half of 4 per million input tokens: 2 per million.
  expect(ledger.every((row) => Number(row.cost) > 0)).toBe(true);
}

describe("batch workers in several gateway processes", () => {
  it("a gateway SIGKILLed mid-batch loses nothing: another takes its lines over", async () => {
    const a = await startGateway();
    const b = await startGateway();
    const client = openaiClient(a.url, key.key);
    // Enough lines that the batch is still running when A dies: two lines in flight
    // per gateway run hundreds a second with grouped writes.
    const lines = Array.from({ length: 1000 }, (_, n) => nliLine(n));
    const created = await submit(client, lines);
    await waitFor(client, created.id, (batch) => batch.request_counts!.completed >= 20, 60_000);
    // Lines leased when A dies: its leases expire after 2 s and B takes them.
    const leasedAtKill = await store.db
      .selectFrom("batch_lines")
      .select("lease_owner")
      .where("batch_id", "=", created.id)
      .where("state", "=", "pending")
      .where("lease_owner", "is not", null)
      .execute();
    await a.process.kill();
    const progressBefore = (await openaiClient(b.url, key.key).batches.retrieve(created.id))
      .request_counts!;
    expect(progressBefore.completed).toBeLessThan(1000);
    expect(leasedAtKill.length).toBeGreaterThan(0);
    await expectExactlyOnce(openaiClient(b.url, key.key), created.id, 1000);
    await b.process.kill();
  }, 180_000);

  it("a batch survives the death of every gateway and resumes in the next", async () => {
    const first = await startGateway();
    const client = openaiClient(first.url, key.key);
    const lines = Array.from({ length: 1000 }, (_, n) => nliLine(n));
    const created = await submit(client, lines);
    await waitFor(client, created.id, (batch) => batch.request_counts!.completed >= 10, 60_000);
    await first.process.kill();
    // Nothing runs while no gateway is up.
    const stalled = await store.db
      .selectFrom("batches")
      .select("status")
      .where("id", "=", created.id)
      .executeTakeFirstOrThrow();
    expect(stalled.status).toBe("in_progress");
    const next = await startGateway();
    await expectExactlyOnce(openaiClient(next.url, key.key), created.id, 1000);
    await next.process.stop();
  }, 180_000);
});
