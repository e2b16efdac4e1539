/**
 * What storing costs the answer path, measured end to end: the same
 * non-streamed create (tiny-gpt, 4 output tokens) with `store: false` and
 * with `store: true` (one INSERT before the answer), alternated so both see
 * the same machine, on the embedded PGlite and on a PostgreSQL server.
 *
 * Then the write alone, as the answer path makes it (ResponseStore.save: one
 * INSERT of a 1.5 KB response), on each engine; and sixteen saves asked for
 * at once (sixteen streams ending in one decode step: one shared INSERT)
 * against the same sixteen one after another (one INSERT each), alternated,
 * in the event loop's CPU time per save.
 *
 *   npx tsx test/gateway/stored/store-cost.measure.ts [requests per arm, default 300]
 *   npx tsx test/gateway/stored/store-cost.measure.ts --shared   (only the sixteen saves)
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StoreTarget } from "../../../gateway/store/connect.js";
import { ResponseStore } from "../../../gateway/store/response-store.js";
import { openStore } from "../../../gateway/store/store.js";
import { seedPgliteFolder } from "../../support/pglite-template.js";
import { startPostgresServer } from "../../support/postgres-server.js";
import { startPlatform } from "../support/platform.js";

const sharedOnly = process.argv.includes("--shared");
const N = Number((sharedOnly ? undefined : process.argv[2]) ?? 300);
const ASK = { model: "tiny-gpt", input: "Hello there", max_output_tokens: 4, temperature: 0 };

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function measure(label: string, databaseUrl?: string): Promise<void> {
  const p = await startPlatform(databaseUrl ? { config: { databaseUrl } } : {});
  try {
    const times = { off: [] as number[], on: [] as number[] };
    for (let i = 0; i < N + 20; i++) {
      for (const arm of i % 2 === 0 ? (["off", "on"] as const) : (["on", "off"] as const)) {
        const started = performance.now();
        const res = await p.api({ ...ASK, store: arm === "on" });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`status ${res.status}`);
        if (i >= 20) times[arm].push(performance.now() - started);
      }
    }
    const off = times.off.sort((a, b) => a - b);
    const on = times.on.sort((a, b) => a - b);
    const fmt = (v: number) => v.toFixed(2);
    console.log(
      `${label}: n=${N} per arm; store:false p50 ${fmt(quantile(off, 0.5))} ms p99 ${fmt(quantile(off, 0.99))} ms; ` +
        `store:true p50 ${fmt(quantile(on, 0.5))} ms p99 ${fmt(quantile(on, 0.99))} ms; ` +
        `added p50 ${fmt(quantile(on, 0.5) - quantile(off, 0.5))} ms`,
    );
  } finally {
    await p.close();
  }
}

/** A response store on `target`, and a save of one typical stored response under `id`. */
async function savingOn(target: StoreTarget) {
  const store = await openStore(target);
  const responses = new ResponseStore({
    db: () => Promise.resolve(store.db),
    retentionSeconds: 3600,
    now: Date.now,
  });
  const response = JSON.stringify({ object: "response", text: "x".repeat(1500) });
  const save = (id: string) =>
    responses.save({
      id,
      owner: "key:acme/",
      model: "tiny-gpt",
      previousResponseId: null,
      inputItems: '[{"id":"msg_1","type":"message","role":"user","content":[]}]',
      response,
      servedBy: "http://10.0.0.7:8000",
    });
  return { store, save };
}

async function measureWrite(label: string, target: StoreTarget): Promise<void> {
  const { store, save } = await savingOn(target);
  const times: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const started = performance.now();
    await save(`resp_${i}`);
    if (i >= 100) times.push(performance.now() - started);
  }
  await store.close();
  times.sort((a, b) => a - b);
  console.log(
    `${label} write alone: n=900; p50 ${quantile(times, 0.5).toFixed(3)} ms p99 ${quantile(times, 0.99).toFixed(3)} ms`,
  );
}

async function measureShared(label: string, target: StoreTarget): Promise<void> {
  const saving = await savingOn(target);
  const store = saving.store;
  let n = 0;
  const save = () => saving.save(`resp_s${n++}`);
  const cpu = { shared: [] as number[], alone: [] as number[] };
  for (let round = 0; round < 60; round++) {
    for (const arm of round % 2 === 0
      ? (["shared", "alone"] as const)
      : (["alone", "shared"] as const)) {
      const before = process.cpuUsage();
      if (arm === "shared") await Promise.all(Array.from({ length: 16 }, save));
      else for (let i = 0; i < 16; i++) await save();
      const used = process.cpuUsage(before);
      if (round >= 10) cpu[arm].push((used.user + used.system) / 1000 / 16);
    }
  }
  await store.close();
  const p50 = (values: number[]) =>
    quantile(
      values.sort((a, b) => a - b),
      0.5,
    );
  console.log(
    `${label} 16 saves at once: p50 ${p50(cpu.shared).toFixed(3)} ms CPU per save (one INSERT); ` +
      `one after another ${p50(cpu.alone).toFixed(3)} ms (16 INSERTs); ` +
      `${(p50(cpu.alone) / p50(cpu.shared)).toFixed(1)}x`,
  );
}

const server = await startPostgresServer();
try {
  if (!sharedOnly) {
    const dataDir = join(await mkdtemp(join(tmpdir(), "store-cost-")), "db");
    await seedPgliteFolder(dataDir);
    await measureWrite("pglite", { dataDir });
    await measureWrite("postgres", { url: await server.createDatabase() });
  }
  const sharedDir = join(await mkdtemp(join(tmpdir(), "store-cost-")), "db");
  await seedPgliteFolder(sharedDir);
  await measureShared("pglite", { dataDir: sharedDir });
  await measureShared("postgres", { url: await server.createDatabase() });
  if (!sharedOnly) {
    await measure("pglite");
    await measure("postgres", await server.createDatabase());
  }
} finally {
  await server.stop();
}
