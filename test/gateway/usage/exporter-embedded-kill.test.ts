import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey, type GeneratedKey } from "../../../gateway/auth/key-format.js";
import {
  fixtureFolder,
  startRuntime,
  type RunningRuntime,
} from "../../runtime/support/runtime-server.js";
import { freePort } from "../../support/free-port.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { openStore } from "../../../gateway/store/store.js";
import { GEN } from "../conformance/support.js";
import { startCountingSink, type CountingSink } from "../outbox/sink-server.js";

/**
 * One gateway process on the embedded ledger (PGlite in its state folder)
 * with a usage sink, whose exporter is fed the rows as they are written
 * (ledger-exporter.ts, `feed`): SIGKILLed under load and started again on
 * its folder, it ships what its journal held and exports from its durable
 * cursor. In the end every answered request reached the sink, each counted
 * once, and only the batch in flight at the kill may have been sent twice.
 */
let runtime: RunningRuntime;
let sink: CountingSink;
let dir: string;
let key: GeneratedKey;

beforeAll(async () => {
  runtime = await startRuntime({ path: await fixtureFolder("tiny-gpt"), modelId: "tiny-gpt" });
  sink = await startCountingSink();
  dir = await mkdtemp(join(tmpdir(), "exporter-embedded-"));
  key = generateApiKey();
  await writeFile(
    join(dir, "keys.yaml"),
    `accounts:\n  - id: acme\nkeys:\n  - id: ${key.id}\n    hash: ${key.hash}\n    account: acme\n`,
  );
  await mkdir(join(dir, "models"), { recursive: true });
  await writeFile(
    join(dir, "models", "tiny-gpt.yaml"),
    `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: tiny-gpt\nspec:\n  task: text-generation\n  source: { uri: file:///models/x }\nstatus:\n  endpoint: ${runtime.url}\n`,
  );
});
afterAll(async () => {
  await runtime?.close();
  await sink?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Gateway {
  url: string;
  process: ServiceProcess;
}

async function startGateway(): Promise<Gateway> {
  const port = await freePort();
  const metricsPort = await freePort();
  const process = await startServiceProcess({
    args: [
      "gateway",
      `--models-dir=${join(dir, "models")}`,
      `--keys-file=${join(dir, "keys.yaml")}`,
      `--state-dir=${join(dir, "state")}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--metrics-port=${metricsPort}`,
      `--usage-sink-url=${sink.url}`,
      "--rate-limit-per-minute=1000000",
      "--rate-limit-burst=100000",
    ],
    readyUrl: `http://127.0.0.1:${metricsPort}/readyz`,
  });
  return { url: `http://127.0.0.1:${port}`, process };
}

async function until(what: string, done: () => boolean | Promise<boolean>, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("the embedded ledger's fed exporter across a SIGKILL", () => {
  it("every answered request reaches the sink once, before and after the restart", async () => {
    const gateway = await startGateway();
    const answered: string[] = [];
    let stop = false;
    const client = async (url: string) => {
      while (!stop) {
        try {
          const res = await fetch(`${url}/v1/responses`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-api-key": key.key },
            body: JSON.stringify(GEN),
          });
          if (res.status === 200) answered.push(((await res.json()) as { id: string }).id);
        } catch {
          return; // the gateway died under it: never answered
        }
      }
    };
    let clients = [1, 2, 3, 4].map(() => client(gateway.url));
    // Past the first rows at the sink: the exporter has caught up and is on its feed.
    await until("rows at the sink", () => sink.counted.size >= 20);
    while (answered.length < sink.counted.size + 80)
      await new Promise((resolve) => setTimeout(resolve, 20));
    await gateway.process.kill();
    await Promise.all(clients);

    const again = await startGateway();
    try {
      const before = answered.length;
      clients = [1, 2].map(() => client(again.url));
      while (answered.length < before + 40) await new Promise((resolve) => setTimeout(resolve, 20));
      stop = true;
      await Promise.all(clients);
      await until("every answered request at the sink", () =>
        answered.every((id) => sink.counted.has(id)),
      );
      // A poll and more: a row journaled but not answered before the kill is exported too.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const repeats = sink.attempts.length - new Set(sink.attempts).size;
      expect(repeats).toBeLessThanOrEqual(100);
      console.log(
        `answered ${answered.length}, sink ${sink.counted.size}, delivered twice ${repeats}`,
      );
    } finally {
      await again.process.stop();
    }
    // The sink holds exactly the ledger's rows (a request answered as the
    // process died may be in both without its client having read it).
    const store = await openStore({ dataDir: join(dir, "state", "db") });
    try {
      const rows = await store.db.selectFrom("usage_ledger").select("response_id").execute();
      expect(new Set(sink.counted.keys())).toEqual(new Set(rows.map((row) => row.response_id)));
    } finally {
      await store.close();
    }
  }, 120_000);
});
