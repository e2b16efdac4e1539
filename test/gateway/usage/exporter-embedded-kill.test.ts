import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GeneratedKey } from "../../../gateway/auth/key-format.js";
import {
  fixtureFolder,
  startRuntime,
  type RunningRuntime,
} from "../../runtime/support/runtime-server.js";
import { openStore } from "../../../gateway/store/store.js";
import { GEN } from "../conformance/support.js";
import { startCountingSink, type CountingSink } from "../outbox/sink-server.js";
import {
  gatewayFolder,
  startExporterGateway,
  until,
  type GatewayFolder,
} from "./exporter-gateways.js";

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
let folder: GatewayFolder;
let key: GeneratedKey;

beforeAll(async () => {
  runtime = await startRuntime({ path: await fixtureFolder("tiny-gpt"), modelId: "tiny-gpt" });
  sink = await startCountingSink();
  folder = await gatewayFolder("exporter-embedded-", runtime.url);
  key = folder.key;
});
afterAll(async () => {
  await runtime?.close();
  await sink?.close();
  if (folder) await rm(folder.dir, { recursive: true, force: true });
});

/** The gateway on the folder's one state folder, its ledger embedded there. */
const startGateway = () => startExporterGateway(folder, "state", sink.url);

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
    await until("rows at the sink", () => sink.counted.size >= 20, 60_000);
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
      await until(
        "every answered request at the sink",
        () => answered.every((id) => sink.counted.has(id)),
        60_000,
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
    const store = await openStore({ dataDir: join(folder.dir, "state", "db") });
    try {
      const rows = await store.db.selectFrom("usage_ledger").select("response_id").execute();
      expect(new Set(sink.counted.keys())).toEqual(new Set(rows.map((row) => row.response_id)));
    } finally {
      await store.close();
    }
  }, 120_000);
});
