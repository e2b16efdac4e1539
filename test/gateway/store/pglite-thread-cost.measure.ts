/**
 * What the embedded PGlite costs the gateway's event loop, on the main
 * thread (as before) and in its worker thread (as now), alternated round by
 * round in one run so that both see the same machine:
 *
 * - a stored response's save (ResponseStore.save: one INSERT of a 1.5 KB
 *   response), sixteen one after another: the main thread's CPU a save
 *   (process.threadCpuUsage, this thread only) and the whole process's
 *   (both threads: what the worker adds in copying and messaging);
 * - a usage-ledger batch of 100 rows (one INSERT … unnest, as the ledger's
 *   100 ms linger writes it): the main thread's CPU and the longest the
 *   event loop was held meanwhile (a 1 ms timer's worst lateness).
 *
 *   npx tsx test/gateway/store/pglite-thread-cost.measure.ts [rounds, default 30]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { Kysely, PGliteDialect } from "kysely";
import { connectStore } from "../../../gateway/store/connect.js";
import type { Database } from "../../../gateway/store/database.js";
import type { LedgerEntry } from "../../../gateway/store/ledger-entry.js";
import { migrateToLatest } from "../../../gateway/store/migrate.js";
import { ResponseStore } from "../../../gateway/store/response-store.js";
import { recordLedgerEntries } from "../../../gateway/store/usage-ledger.js";
import { seedPgliteFolder } from "../../support/pglite-template.js";

const ROUNDS = Number(process.argv[2] ?? 30);
const WARMUP = 5;
const SAVES = 16;
const BATCH = 100;

type Arm = "main" | "thread";

async function openArm(arm: Arm, dataDir: string): Promise<Kysely<Database>> {
  await seedPgliteFolder(dataDir);
  const db =
    arm === "thread"
      ? (await connectStore({ dataDir })).db
      : new Kysely<Database>({
          dialect: new PGliteDialect({
            pglite: await PGlite.create(dataDir, { postgresqlconf: ["shared_buffers=16MB"] }),
          }),
        });
  await migrateToLatest(db);
  return db;
}

let serial = 0;
function entries(): LedgerEntry[] {
  return Array.from({ length: BATCH }, () => {
    const n = serial++;
    return {
      responseId: `resp_${n}`,
      requestId: `req-${n}`,
      route: "/v1/responses",
      account: "acme",
      project: "web",
      keyId: "key_1",
      agentId: null,
      model: "tiny-gpt",
      inputTokens: 10,
      outputTokens: 8,
      cost: "0.000105",
      currency: "USD",
      time: new Date().toISOString(),
    };
  });
}

/** The worst lateness of a 1 ms timer chain while `work` runs. */
async function heldWhile<T>(work: () => Promise<T>): Promise<number> {
  let worst = 0;
  let running = true;
  let last = performance.now();
  const tick = () => {
    const now = performance.now();
    worst = Math.max(worst, now - last - 1);
    last = now;
    if (running) timer = setTimeout(tick, 1);
  };
  let timer = setTimeout(tick, 1);
  try {
    await work();
    // The last stretch of the work, up to its reply, counts too.
    tick();
  } finally {
    running = false;
    clearTimeout(timer);
  }
  return worst;
}

const ms = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

const dir = await mkdtemp(join(tmpdir(), "pglite-thread-cost-"));
const dbs = {
  main: await openArm("main", join(dir, "main")),
  thread: await openArm("thread", join(dir, "thread")),
};
const stores = Object.fromEntries(
  (["main", "thread"] as const).map((arm) => [
    arm,
    new ResponseStore({
      db: () => Promise.resolve(dbs[arm]),
      retentionSeconds: 3600,
      now: Date.now,
    }),
  ]),
) as Record<Arm, ResponseStore>;
const response = JSON.stringify({ object: "response", text: "x".repeat(1500) });

const figures = Object.fromEntries(
  (["main", "thread"] as const).map((arm) => [
    arm,
    {
      saveLoop: [] as number[],
      saveAll: [] as number[],
      batchLoop: [] as number[],
      held: [] as number[],
    },
  ]),
) as Record<Arm, { saveLoop: number[]; saveAll: number[]; batchLoop: number[]; held: number[] }>;

try {
  for (let round = 0; round < ROUNDS + WARMUP; round++) {
    for (const arm of round % 2 === 0
      ? (["main", "thread"] as const)
      : (["thread", "main"] as const)) {
      const loop0 = process.threadCpuUsage();
      const all0 = process.cpuUsage();
      for (let i = 0; i < SAVES; i++) {
        await stores[arm].save({
          id: `resp_${arm}_${round}_${i}`,
          owner: "key:acme/",
          model: "tiny-gpt",
          previousResponseId: null,
          inputItems: '[{"id":"msg_1","type":"message","role":"user","content":[]}]',
          response,
          servedBy: "http://10.0.0.7:8000",
        });
      }
      const saveLoop = ms(process.threadCpuUsage(loop0)) / SAVES;
      const saveAll = ms(process.cpuUsage(all0)) / SAVES;

      const batch = entries();
      const batch0 = process.threadCpuUsage();
      const held = await heldWhile(() => recordLedgerEntries(dbs[arm], batch));
      const batchLoop = ms(process.threadCpuUsage(batch0));
      if (round >= WARMUP) {
        const f = figures[arm];
        f.saveLoop.push(saveLoop);
        f.saveAll.push(saveAll);
        f.batchLoop.push(batchLoop);
        f.held.push(held);
      }
    }
  }
  const m = (arm: Arm, key: keyof (typeof figures)["main"]) => median(figures[arm][key]);
  const max = (arm: Arm) => Math.max(...figures[arm].held);
  for (const arm of ["main", "thread"] as const) {
    console.log(
      `${arm.padEnd(6)} save: event loop ${m(arm, "saveLoop").toFixed(3)} ms CPU, both threads ${m(arm, "saveAll").toFixed(3)} ms; ` +
        `ledger batch of ${BATCH}: event loop ${m(arm, "batchLoop").toFixed(3)} ms CPU, ` +
        `loop held p50 ${m(arm, "held").toFixed(2)} ms max ${max(arm).toFixed(2)} ms`,
    );
  }
  console.log(
    `rounds=${ROUNDS} (medians); thread/main: save event-loop CPU ${(m("thread", "saveLoop") / m("main", "saveLoop")).toFixed(2)}x, ` +
      `batch event-loop CPU ${(m("thread", "batchLoop") / m("main", "batchLoop")).toFixed(2)}x, ` +
      `loop held p50 ${(m("thread", "held") / m("main", "held")).toFixed(2)}x`,
  );
} finally {
  await dbs.main.destroy();
  await dbs.thread.destroy();
  await rm(dir, { recursive: true, force: true });
}
