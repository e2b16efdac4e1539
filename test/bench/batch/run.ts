// `npm run bench:batch [-- --quick]`: the Batch API on a generated fixture
// model (tiny-nli), with a real PostgreSQL server as the store:
//  1. batch throughput (requests per second from batches.create to
//     `completed`) against the same requests sent synchronously at the best
//     concurrency found (target: at least 0.9x);
//  2. interactive p99 latency at a fixed rate, alone and while a batch runs
//     (target: at most 1.25x);
//  3. time and peak resident memory of a gateway child process ingesting and
//     validating a small and a ten times larger batch file, and running a
//     small and a large batch (target: flat, not proportional; ./ingest.ts).
// Every server is its own process, as deployed: the runtime (runtime/main.ts's
// wiring, one ORT thread), the gateway (`modelgate gateway`'s wiring, with
// its batch workers) and PostgreSQL; the load generator is this process, so
// the client's CPU is never the gateway's event loop. Sections 1 and 2
// alternate their two sides round by round and compare medians, so that a
// slow spell of the shared machine lands on both. Prints one table; exits
// non-zero only when the run itself breaks (failed requests, a batch not
// completed). See docs/batch.md.
import { rm } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { toFile, type OpenAI } from "openai";
import { Pool } from "undici";
import { finished, jsonlOf, nliLine, openaiClient, waitFor } from "../../gateway/batch/support.js";
import { fixtureFolder } from "../../runtime/support/runtime-server.js";
import { startDatabaseServer } from "../gateway/database-server.js";
import { writeGatewayFiles } from "../gateway/gateway-files.js";
import { startGateway } from "../gateway/processes.js";
import { startRuntimeProcess } from "../runtime/runtime-process.js";
import { INGEST_PLANS, runIngestBench } from "./ingest.js";
import {
  describeSteps,
  readRuntimeSteps,
  stepsBetween,
  type RuntimeSteps,
} from "./runtime-steps.js";
import { runClosedLoop, type LoadRequest } from "../support/closed-loop.js";
import { startRun } from "../support/run-clock.js";
import { freePort } from "../../support/free-port.js";
import { fmt, fmtRatio, median, quantile } from "../runtime/stats.js";
import {
  autovacuumDone,
  describeSuspects,
  describeTimeline,
  probePauses,
  startTimeline,
  type Sent,
  type Slice,
} from "./timeline.js";

const quick = process.argv.includes("--quick");
const plan = quick
  ? {
      lines: 4_000,
      clients: [4, 8, 16, 32],
      rounds: 5,
      // 5 s: a 3 s window's p99 was its 26th-worst request at ~860 a second.
      rateSeconds: 5,
      rateRounds: 8,
      leadSeconds: 0.5,
      workers: 32,
    }
  : {
      lines: 50_000,
      clients: [4, 8, 16, 32, 64],
      rounds: 3,
      rateSeconds: 20,
      // Five: the median of three rounds moved with one bad round.
      rateRounds: 5,
      leadSeconds: 1,
      workers: 32,
    };
// A targeted sub-run while working on one figure: `--lines=N`, `--rounds=N`,
// `--clients=64` (the probes), `--rate-rounds=N` (section 2), `--only=throughput|beside|ingest`
// (comma-separated); the table then holds the sections run.
const option = (name: string) =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);
if (option("lines")) plan.lines = Number(option("lines"));
if (option("rounds")) plan.rounds = Number(option("rounds"));
if (option("rate-rounds")) plan.rateRounds = Number(option("rate-rounds"));
if (option("clients")) plan.clients = option("clients")!.split(",").map(Number);
const only = new Set(option("only")?.split(",") ?? ["throughput", "beside", "ingest"]);
const { log, elapsedSeconds } = startRun(quick ? 600_000 : 3_600_000);
log(`modelgate batch benchmark (${quick ? "quick" : "full"}): ${JSON.stringify(plan)}`);

const pg = await startDatabaseServer();
const databaseUrl = pg.url;
const withTimeline = process.argv.includes("--timeline");
/**
 * With `--timeline`, the runtime and the gateway each load ./gc-probe.ts
 * (their GC time and event-loop delay, on a port of their own): set in the
 * environment they inherit only while each starts.
 */
const probePorts = { runtime: await freePort(), gateway: await freePort() };
async function withProbe<T>(port: number, start: () => Promise<T>): Promise<T> {
  if (!withTimeline) return start();
  const saved = { options: process.env.NODE_OPTIONS, port: process.env.MODELGATE_BENCH_PROBE_PORT };
  process.env.NODE_OPTIONS = `${saved.options ?? ""} --import ${fileURLToPath(new URL("./gc-probe.ts", import.meta.url))}`;
  process.env.MODELGATE_BENCH_PROBE_PORT = String(port);
  try {
    return await start();
  } finally {
    if (saved.options === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = saved.options;
    if (saved.port === undefined) delete process.env.MODELGATE_BENCH_PROBE_PORT;
    else process.env.MODELGATE_BENCH_PROBE_PORT = saved.port;
  }
}
// One ORT thread: on two cores the runtime has one, the gateway and PostgreSQL the other.
const tinyNli = await fixtureFolder("tiny-nli");
const runtime = await withProbe(probePorts.runtime, () =>
  startRuntimeProcess({ path: tinyNli, modelId: "tiny-nli", threads: 1, throughput: {} }),
);
const setup = await writeGatewayFiles({
  model: "tiny-nli",
  runtimeUrl: runtime.url,
  sinkUrl: null,
  providerUrl: null,
  logLevel: "warn",
});
// `--ab=<flag>=A,B` (a gateway flag, camelCase: `--ab=batchPacedSpacingMs=5,20`):
// section 2 runs each round's beside window once with the gateway at each
// value, beside the one alone window, the sides' order rotated round by
// round. The gateway is restarted before every side, the alone one too, and
// warmed up alike (`warmUp`): a window on a gateway started just before ran
// its first second at several times the p99 of one on a warm gateway.
const abOption = option("ab");
const abFlag = abOption?.slice(0, abOption.indexOf("=")) ?? "";
const abValues = abOption?.slice(abOption.indexOf("=") + 1).split(",") ?? [];
const startBenchGateway = (abValue?: string) =>
  withProbe(probePorts.gateway, () =>
    startGateway(
      {
        ...setup,
        flags: {
          ...setup.flags,
          databaseUrl,
          batchWorkers: String(plan.workers),
          batchPollMs: "50",
          ...(abValue === undefined ? {} : { [abFlag]: abValue }),
        },
      },
      null,
    ),
  );
let gatewayVariant = abValues[0];
let gateway = await startBenchGateway(gatewayVariant);
log(`runtime ${runtime.pid}, gateway ${gateway.pid}: ready`);
async function gatewayWith(abValue: string): Promise<void> {
  await gateway.stop();
  gateway = await startBenchGateway(abValue);
  gatewayVariant = abValue;
  client = openaiClient(gateway.url, setup.apiKey);
  await warmUp();
}
let client = openaiClient(gateway.url, setup.apiKey);
const requests: LoadRequest[] = Array.from({ length: 64 }, (_, n) => ({
  path: "/v1/responses",
  headers: { "content-type": "application/json", "x-api-key": setup.apiKey },
  body: JSON.stringify(nliLine(n).body),
}));
const batchLines = (count: number) => Array.from({ length: count }, (_, n) => nliLine(n));
let broken = false;

/**
 * CPU milliseconds per request of the gateway, the runtime and PostgreSQL
 * over what `work` did: where a line's time goes, sync against batch.
 */
type CpuShare = [gateway: number, runtime: number, postgres: number];
const cpuOf: Record<"sync" | "batch", CpuShare[]> = { sync: [], batch: [] };
async function measured(side: "sync" | "batch", work: () => Promise<number>): Promise<number> {
  const read = () => Promise.all([gateway.cpuSeconds(), runtime.cpuSeconds(), pg.cpuSeconds()]);
  const before = await read();
  const rps = await work();
  const after = await read();
  cpuOf[side].push(after.map((end, i) => ((end - before[i]!) * 1000) / plan.lines) as CpuShare);
  return rps;
}
const cpuText = (side: "sync" | "batch") =>
  [0, 1, 2].map((i) => fmt(median(cpuOf[side].map((share) => share[i]!)))).join(" / ");

async function syncRps(clients: number, count: number): Promise<number> {
  const run = await runClosedLoop(gateway.url, requests, {
    clients,
    durationMs: 120_000,
    maxRequests: count,
  });
  if (run.failed > 0) {
    broken = true;
    log(`sync, ${clients} clients: ${run.failed} failed, first: ${run.firstFailure}`);
  }
  return run.completed / (run.elapsedMs / 1000);
}

/** Uploads the file untimed, then times batches.create to `completed`. */
async function batchRps(count: number): Promise<number> {
  const file = await uploadLines(client, count);
  const started = performance.now();
  const created = await client.batches.create({
    input_file_id: file,
    endpoint: "/v1/responses",
    completion_window: "24h",
  });
  const done = await waitFor(client, created.id, finished, 3_600_000);
  const seconds = (performance.now() - started) / 1000;
  if (done.status !== "completed" || done.request_counts?.completed !== count) {
    broken = true;
    log(`batch ${done.status}: ${JSON.stringify(done.request_counts)}`);
  }
  return (done.request_counts?.completed ?? 0) / seconds;
}

async function uploadLines(openai: OpenAI, count: number): Promise<string> {
  const file = await openai.files.create({
    file: await toFile(jsonlOf(batchLines(count)), "input.jsonl"),
    purpose: "batch",
  });
  return file.id;
}

// 1. Synchronous throughput: the best concurrency (a short probe of each),
// then rounds of sync and batch alternating (A-B, B-A, ...), medians compared.
let best = { clients: 0, rps: 0 };
for (const clients of only.has("throughput") || only.has("beside") ? plan.clients : []) {
  const rps = await syncRps(clients, Math.ceil(plan.lines / 2));
  log(`sync probe, ${clients} clients: ${fmt(rps)} req/s`);
  if (rps > best.rps) best = { clients, rps };
}
const syncRounds: number[] = [];
const batchRounds: number[] = [];
for (let round = 0; only.has("throughput") && round < plan.rounds; round++) {
  const sides = [
    async () => syncRounds.push(await measured("sync", () => syncRps(best.clients, plan.lines))),
    async () => batchRounds.push(await measured("batch", () => batchRps(plan.lines))),
  ];
  if (round % 2 === 1) sides.reverse();
  for (const side of sides) await side();
  log(
    `round ${round + 1}: sync ${fmt(syncRounds.at(-1)!)} req/s at ${best.clients} clients, batch ${fmt(batchRounds.at(-1)!)} req/s`,
  );
}
// Without the rounds, the best probe sizes the fixed rate and the background batch.
const syncMedian = syncRounds.length > 0 ? median(syncRounds) : best.rps;
const batchMedian = batchRounds.length > 0 ? median(batchRounds) : best.rps;

// 2. Interactive traffic at a fixed rate (a third of the sync median), alone
// and beside a batch big enough to outlast the window, alternating sides.
const rate = Math.max(1, Math.floor(syncMedian / 3));
/**
 * Sends at the fixed rate for a lead-in, then for `seconds` measured: the
 * lead-in's latencies are not kept (both sides alike). It is the previous
 * step's garbage (the bench process built a batch file just before) being
 * collected in the load generator, and connections being opened: a user's
 * steady traffic has neither. The pool is kept from window to window (one
 * per gateway process): opened anew for each window, its connections were
 * opened in the window's first second, where the slow requests of many
 * windows were, alone and beside alike.
 */
const interactive: { url: string; pool: Pool | null } = { url: "", pool: null };
async function poolFor(url: string): Promise<Pool> {
  if (!interactive.pool || interactive.url !== url) {
    await interactive.pool?.close();
    interactive.url = url;
    interactive.pool = new Pool(url, { connections: 64 });
  }
  return interactive.pool;
}
async function fixedRate(seconds: number, latencies: number[], sent?: Sent[]): Promise<number> {
  const pool = await poolFor(gateway.url);
  let failed = 0;
  const sends: Promise<void>[] = [];
  const started = performance.now();
  const lead = Math.round(rate * plan.leadSeconds);
  for (let i = 0; i < lead + rate * seconds; i++) {
    const kept = i >= lead;
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const request = requests[i % requests.length]!;
    const sentAt = performance.now();
    sends.push(
      pool
        .request({
          path: request.path,
          method: "POST",
          headers: request.headers,
          body: request.body,
        })
        .then(async (response) => {
          await response.body.text();
          if (response.statusCode !== 200) failed++;
          else if (kept) {
            latencies.push(performance.now() - sentAt);
            sent?.push([sentAt, performance.now() - sentAt]);
          }
        })
        .catch(() => void failed++),
    );
  }
  await Promise.all(sends);
  return failed;
}
/** Traffic at the fixed rate for a few seconds, not measured: a fresh gateway's JIT and pools. */
async function warmUp(): Promise<void> {
  if ((await fixedRate(WARM_UP_SECONDS, [])) > 0) broken = true;
}
const WARM_UP_SECONDS = 2;
// A batch file holds 50,000 lines at most: a batch that fast still outlasts
// the window beside interactive traffic, which takes its share of the runtime.
const backgroundLines = Math.min(50_000, Math.ceil(batchMedian * plan.rateSeconds * 1.5) + 1000);
const aloneLatencies: number[] = [];
const besideLatencies: number[] = [];
/** Per round, the p99 of its alone window and of its beside window. */
const roundP99s: Array<{ alone: number; beside: number; lines: number }> = [];
const timelines: Array<{ label: string; slices: Slice[]; sent: Sent[] }> = [];
/** Per window, the CPU each process used per second of it (cores busy). */
const windowCpu: Record<"alone" | "beside", CpuShare[]> = { alone: [], beside: [] };
const windowCpuText = (side: "alone" | "beside") =>
  [0, 1, 2].map((i) => fmt(median(windowCpu[side].map((share) => share[i]!)))).join(" / ");

/** Per side ("alone", "beside", "beside at <flag>=<value>"), the runtime's queue and steps in each window. */
const windowSteps = new Map<string, RuntimeSteps[]>();

/** The last window's cores busy per process and its length, lead-in included. */
let lastWindow = { cores: [0, 0, 0] as CpuShare, seconds: 0 };
/**
 * Per beside side, each window's cores busy and the batch lines it did per
 * second (counted from the window's start, lead-in included, as its CPU is):
 * what a paced line costs beside interactive traffic, over the alone windows.
 */
const besideCost = new Map<string, Array<{ cores: CpuShare; linesPerSecond: number }>>();
const costText = (side: string) => {
  const windows = besideCost.get(side) ?? [];
  return [0, 1, 2]
    .map((i) => {
      const alone = median(windowCpu.alone.map((share) => share[i]!));
      return fmt(median(windows.map((w) => ((w.cores[i]! - alone) * 1000) / w.linesPerSecond)));
    })
    .join(" / ");
};

/**
 * A full collection of this process's heap, before every window (alone and
 * beside alike): the load generator then starts each window with the same
 * heap. The timeline showed its GC time at 29 ms a second in beside windows
 * against 8.5 alone (a quick round; 26.3 against 21.9 at full size), and
 * most of the slow requests sent in slices with over 5 ms of it: partly the
 * garbage of what the bench itself did before a beside window (building and
 * uploading the batch file), which a user's traffic does not carry.
 */
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

/** One fixed-rate window; its latencies go to `into` and are returned. */
async function rateWindow(label: string, into: number[]): Promise<number[]> {
  const latencies: number[] = [];
  const sent: Sent[] = [];
  collectGarbage();
  const cpuNow = () => Promise.all([gateway.cpuSeconds(), runtime.cpuSeconds(), pg.cpuSeconds()]);
  const cpuBefore = await cpuNow();
  const stepsBefore = await readRuntimeSteps(runtime.url);
  const started = performance.now();
  const timeline = withTimeline
    ? await startTimeline(
        databaseUrl,
        () => Promise.all([gateway.cpuSeconds(), runtime.cpuSeconds(), pg.cpuSeconds()]),
        () => Promise.all([probePauses(probePorts.gateway), probePauses(probePorts.runtime)]),
      )
    : null;
  if ((await fixedRate(plan.rateSeconds, latencies, sent)) > 0) broken = true;
  const cpuAfter = await cpuNow();
  const seconds = (performance.now() - started) / 1000;
  const side = label.replace(/ \d+/, "");
  windowSteps.set(side, [
    ...(windowSteps.get(side) ?? []),
    stepsBetween(stepsBefore, await readRuntimeSteps(runtime.url)),
  ]);
  lastWindow = {
    cores: cpuAfter.map((end, i) => (end - cpuBefore[i]!) / seconds) as CpuShare,
    seconds,
  };
  (label.startsWith("beside") ? windowCpu.beside : windowCpu.alone).push(lastWindow.cores);
  if (timeline) timelines.push({ label, slices: await timeline.stop(), sent });
  into.push(...latencies);
  return latencies;
}

/**
 * Before each side of a round, the dead rows of the previous side are
 * vacuumed (after any autovacuum running ends, 15 s at most): the previous
 * side's cancelled background batch (the bench's own doing: a user's batch
 * runs to its end) left ~47,000 rows failed in one UPDATE, whose vacuum
 * would otherwise fall in whichever window came next.
 * What the new batch itself sets off (its validation's insert) still falls
 * in its window.
 */
async function settle(): Promise<void> {
  if (!(await autovacuumDone(databaseUrl, 15_000)))
    log("settle: autovacuum still running after 15 s");
}

/**
 * The background batches' input file, uploaded once and run by every beside
 * side: built and uploaded before each side, the 50,000-line file left tens
 * of MB of garbage in the load generator (and the gateway's upload) that
 * were collected in the window; the upload is not the batch running.
 */
let backgroundFile: string | null = null;

async function besideBatch(round: number, into: number[]): Promise<{ p99: number; lines: number }> {
  backgroundFile ??= await uploadLines(client, backgroundLines);
  await settle();
  const background = await client.batches.create({
    input_file_id: backgroundFile,
    endpoint: "/v1/responses",
    completion_window: "24h",
  });
  await waitFor(client, background.id, (b) => b.status === "in_progress" || finished(b));
  const side = `beside${gatewayVariant ? ` at ${abFlag}=${gatewayVariant}` : ""}`;
  const before = await client.batches.retrieve(background.id);
  const latencies = await rateWindow(side.replace("beside", `beside ${round + 1}`), into);
  const after = await client.batches.retrieve(background.id);
  const linesPerSecond =
    ((after.request_counts?.completed ?? 0) - (before.request_counts?.completed ?? 0)) /
    lastWindow.seconds;
  besideCost.set(side, [
    ...(besideCost.get(side) ?? []),
    { cores: lastWindow.cores, linesPerSecond },
  ]);
  if (after.status !== "in_progress") log(`the background batch ended early: ${after.status}`);
  const lines = after.request_counts?.completed ?? 0;
  log(`beside: the batch had ${lines} lines done at the window's end`);
  await client.batches.cancel(background.id).catch(() => undefined);
  await waitFor(client, background.id, finished);
  return { p99: quantile(latencies, 0.99), lines };
}
/** With `--ab`: per variant, each round's beside p99 and lines done. */
const abRounds = new Map<string, Array<{ alone: number; beside: number; lines: number }>>(
  abValues.map((value) => [value, []]),
);
const abLatencies = new Map<string, number[]>(abValues.map((value) => [value, []]));
for (let round = 0; only.has("beside") && abValues.length > 0 && round < plan.rateRounds; round++) {
  let alone = Number.NaN;
  const beside = new Map<string, { p99: number; lines: number }>();
  const sides = [
    async () => {
      await gatewayWith(abValues[0]!);
      await settle();
      alone = quantile(await rateWindow(`alone ${round + 1}`, aloneLatencies), 0.99);
    },
    ...abValues.map((value) => async () => {
      await gatewayWith(value);
      beside.set(value, await besideBatch(round, abLatencies.get(value)!));
    }),
  ];
  const turn = round % sides.length;
  for (const side of [...sides.slice(turn), ...sides.slice(0, turn)]) await side();
  const text = abValues.map((value) => {
    const b = beside.get(value)!;
    abRounds.get(value)!.push({ alone, beside: b.p99, lines: b.lines });
    return `${abFlag}=${value}: ${fmt(b.p99)} ms (${fmtRatio(b.p99 / alone)}), ${b.lines} lines`;
  });
  log(`round ${round + 1}: p99 ${fmt(alone)} ms alone; beside at ${text.join("; ")}`);
}
for (
  let round = 0;
  only.has("beside") && abValues.length === 0 && round < plan.rateRounds;
  round++
) {
  let alone = Number.NaN;
  let beside = { p99: Number.NaN, lines: 0 };
  const sides = [
    async () => {
      await settle();
      alone = quantile(await rateWindow(`alone ${round + 1}`, aloneLatencies), 0.99);
    },
    async () => {
      beside = await besideBatch(round, besideLatencies);
    },
  ];
  if (round % 2 === 1) sides.reverse();
  for (const side of sides) await side();
  roundP99s.push({ alone, beside: beside.p99, lines: beside.lines });
  log(
    `round ${round + 1}: p99 ${fmt(alone)} ms alone, ${fmt(beside.p99)} ms beside (${fmtRatio(beside.p99 / alone)}), ${beside.lines} lines done beside`,
  );
}
const aloneP99 = quantile(aloneLatencies, 0.99);
const besideP99 = quantile(besideLatencies, 0.99);
const roundRatios = roundP99s.map((r) => r.beside / r.alone);
if (only.has("beside")) {
  log(
    `interactive at ${rate} req/s: p99 ${fmt(aloneP99)} ms alone, ${fmt(besideP99)} ms beside a batch of ${backgroundLines}`,
  );
  for (const { label, slices, sent } of timelines) {
    for (const line of describeTimeline(label, slices, sent, aloneP99)) log(line);
  }
  for (const side of new Set(timelines.map((t) => t.label.replace(/ \d+/, "")))) {
    const windows = timelines.filter((t) => t.label.replace(/ \d+/, "") === side);
    for (const line of describeSuspects(side, windows, aloneP99)) log(line);
  }
}

await interactive.pool?.close();
await gateway.stop();
await runtime.stop();
await pg.stop();
await rm(setup.dir, { recursive: true, force: true });

// 3. Ingestion and a worker's memory, in a gateway child process (./ingest.ts).
// `--child-node-options='...'`: the ingest child's NODE_OPTIONS, to try a V8 bound.
const ingest = only.has("ingest")
  ? await runIngestBench(
      { ...INGEST_PLANS[quick ? "quick" : "full"], nodeOptions: option("child-node-options") },
      log,
    )
  : { broken: false, rows: [] };
if (ingest.broken) broken = true;
// `--only=worker-ab --child-node-options='...' [--lines=N]`: one batch of N
// lines in a fresh gateway child without the options and one with them,
// alternating (A B A B), for a V8 bound's memory and throughput in one run.
if (only.has("worker-ab")) {
  for (const nodeOptions of ["", option("child-node-options"), "", option("child-node-options")]) {
    const run = await runIngestBench(
      { ...INGEST_PLANS.full, uploads: [], batches: [plan.lines], nodeOptions },
      log,
    );
    if (run.broken) broken = true;
    ingest.rows.push(
      ...run.rows.map((row) => row.replace("| worker,", `| '${nodeOptions}', worker,`)),
    );
  }
}
const table = [
  "| figure | value | target |",
  "| --- | --- | --- |",
  ...(only.has("throughput")
    ? [
        `| sync, ${best.clients} clients (best probe), median of ${plan.rounds} | ${fmt(syncMedian)} req/s (${syncRounds.map(fmt).join(", ")}) | |`,
        `| batch (${plan.lines} lines, ${plan.workers} workers), median of ${plan.rounds} | ${fmt(batchMedian)} req/s (${batchRounds.map(fmt).join(", ")}) | |`,
        `| batch / sync | ${fmtRatio(batchMedian / syncMedian)} | >= 0.9x |`,
        `| CPU ms per request, gateway / runtime / PostgreSQL: sync | ${cpuText("sync")} | |`,
        `| CPU ms per request, gateway / runtime / PostgreSQL: batch | ${cpuText("batch")} | |`,
      ]
    : []),
  ...abValues.flatMap((value) => {
    const rounds = abRounds.get(value)!;
    const ratios = rounds.map((r) => r.beside / r.alone);
    return [
      `| ${abFlag}=${value}: p99 beside / alone, each round | ${ratios.map(fmtRatio).join(", ")} | |`,
      `| ${abFlag}=${value}: p99 beside / alone, median of ${ratios.length} rounds | ${fmtRatio(median(ratios))} | <= 1.25x |`,
      `| ${abFlag}=${value}: p99 beside / alone, all windows merged | ${fmtRatio(quantile(abLatencies.get(value)!, 0.99) / aloneP99)} | |`,
      `| ${abFlag}=${value}: batch lines done in each window beside | ${rounds.map((r) => r.lines).join(", ")} | |`,
    ];
  }),
  ...(only.has("beside") && abValues.length > 0
    ? [
        `| interactive p99 at ${rate} req/s, alone (merged) | ${fmt(aloneP99)} ms | |`,
        `| cores busy in a window, gateway / runtime / PostgreSQL: alone | ${windowCpuText("alone")} | |`,
        `| cores busy in a window, gateway / runtime / PostgreSQL: beside (both) | ${windowCpuText("beside")} | |`,
      ]
    : []),
  ...(only.has("beside") && abValues.length === 0
    ? [
        `| interactive p99 at ${rate} req/s | ${fmt(aloneP99)} ms alone, ${fmt(besideP99)} ms beside a batch | |`,
        `| p99 beside / alone, each round | ${roundRatios.map(fmtRatio).join(", ")} | |`,
        `| p99 beside / alone, median of ${roundRatios.length} rounds | ${fmtRatio(median(roundRatios))} | <= 1.25x |`,
        `| p99 beside / alone, all windows merged | ${fmtRatio(besideP99 / aloneP99)} | |`,
        `| cores busy in a window, gateway / runtime / PostgreSQL: alone | ${windowCpuText("alone")} | |`,
        `| cores busy in a window, gateway / runtime / PostgreSQL: beside | ${windowCpuText("beside")} | |`,
        `| batch lines done in each window beside | ${roundP99s.map((r) => r.lines).join(", ")} | |`,
      ]
    : []),
  ...[...besideCost.keys()].map(
    (side) =>
      `| CPU ms per batch line ${side}, over the alone windows: gateway / runtime / PostgreSQL | ${costText(side)} | |`,
  ),
  ...[...windowSteps].map(
    ([side, windows]) =>
      `| runtime, ${side}: interactive admissions waiting over 1 / 5 / 10 ms; step size | ${describeSteps(windows)} | |`,
  ),
  ...ingest.rows,
];
log(`done in ${elapsedSeconds().toFixed(0)} s`);
process.stdout.write(`\n${table.join("\n")}\n`);
if (broken) process.exit(1);
process.exit(0);
