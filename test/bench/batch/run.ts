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
// The gateway and the runtimes run in this process (the test platform), so
// they share its two cores with the load generator. Prints one table; exits
// non-zero only when the run itself breaks (failed requests, a batch not
// completed). See docs/batch.md.
import { Pool } from "undici";
import { startPlatform } from "../../gateway/support/platform.js";
import { finished, nliLine, openaiClient, submit, waitFor } from "../../gateway/batch/support.js";
import { startPostgresServer } from "../../support/postgres-server.js";
import { INGEST_PLANS, runIngestBench } from "./ingest.js";
import { runClosedLoop, type LoadRequest } from "../support/closed-loop.js";
import { startRun } from "../support/run-clock.js";
import { fmt, fmtRatio, quantile } from "../runtime/stats.js";

const quick = process.argv.includes("--quick");
const plan = quick
  ? { lines: 600, clients: [1, 4, 8], rateSeconds: 4, workers: 4 }
  : { lines: 50_000, clients: [1, 4, 8, 16], rateSeconds: 20, workers: 8 };
const { log, elapsedSeconds } = startRun(quick ? 600_000 : 3_600_000);
log(`modelgate batch benchmark (${quick ? "quick" : "full"}): ${JSON.stringify(plan)}`);

const pg = await startPostgresServer();
const databaseUrl = await pg.createDatabase();
const p = await startPlatform({
  withoutPayments: true,
  config: { databaseUrl, batchWorkers: plan.workers, batchPollMs: 50 },
});
const client = openaiClient(p.url, p.keys.acme.key);
const requests: LoadRequest[] = Array.from({ length: 64 }, (_, n) => ({
  path: "/v1/responses",
  headers: { "content-type": "application/json", "x-api-key": p.keys.acme.key },
  body: JSON.stringify(nliLine(n).body),
}));
let broken = false;

// 1. Synchronous throughput at each concurrency, then the batch.
let best = { clients: 0, rps: 0 };
for (const clients of plan.clients) {
  const run = await runClosedLoop(p.url, requests, {
    clients,
    durationMs: 120_000,
    maxRequests: plan.lines,
  });
  const rps = run.completed / (run.elapsedMs / 1000);
  log(`sync, ${clients} clients: ${run.completed} ok, ${run.failed} failed, ${fmt(rps)} req/s`);
  if (run.failed > 0) broken = true;
  if (rps > best.rps) best = { clients, rps };
}
const lines = Array.from({ length: plan.lines }, (_, n) => nliLine(n));
const batchStarted = performance.now();
const created = await submit(client, lines);
const done = await waitFor(client, created.id, finished, 3_600_000);
const batchSeconds = (performance.now() - batchStarted) / 1000;
const batchRps = (done.request_counts?.completed ?? 0) / batchSeconds;
log(`batch: ${done.status}, ${JSON.stringify(done.request_counts)} in ${fmt(batchSeconds)} s`);
if (done.status !== "completed" || done.request_counts?.completed !== plan.lines) broken = true;

// 2. Interactive traffic at a fixed rate (a third of the best throughput), alone and beside a batch.
const rate = Math.max(1, Math.floor(best.rps / 3));
async function fixedRate(seconds: number): Promise<{ p99: number; failed: number }> {
  const pool = new Pool(p.url, { connections: 64 });
  const latencies: number[] = [];
  let failed = 0;
  const sends: Promise<void>[] = [];
  const started = performance.now();
  for (let i = 0; i < rate * seconds; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const request = requests[i % requests.length]!;
    const sent = performance.now();
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
          if (response.statusCode === 200) latencies.push(performance.now() - sent);
          else failed++;
        })
        .catch(() => void failed++),
    );
  }
  await Promise.all(sends);
  await pool.close();
  return { p99: quantile(latencies, 0.99), failed };
}
const alone = await fixedRate(plan.rateSeconds);
const background = await submit(
  client,
  Array.from({ length: plan.lines }, (_, n) => nliLine(n)),
);
await waitFor(client, background.id, (b) => b.status === "in_progress");
const beside = await fixedRate(plan.rateSeconds);
// It may have finished already: then there is nothing to cancel.
await client.batches.cancel(background.id).catch(() => undefined);
await waitFor(client, background.id, finished);
log(
  `interactive at ${rate} req/s: p99 ${fmt(alone.p99)} ms alone, ${fmt(beside.p99)} ms beside a batch`,
);
if (alone.failed + beside.failed > 0) broken = true;

await p.close();
await pg.stop();

// 3. Ingestion and a worker's memory, in a gateway child process (./ingest.ts).
const ingest = await runIngestBench(INGEST_PLANS[quick ? "quick" : "full"], log);
if (ingest.broken) broken = true;
const table = [
  "| figure | value | target |",
  "| --- | --- | --- |",
  `| sync best | ${fmt(best.rps)} req/s at ${best.clients} clients | |`,
  `| batch (${plan.lines} lines, ${plan.workers} workers) | ${fmt(batchRps)} req/s | |`,
  `| batch / sync | ${fmtRatio(batchRps / best.rps)} | >= 0.9x |`,
  `| interactive p99 at ${rate} req/s | ${fmt(alone.p99)} ms alone, ${fmt(beside.p99)} ms beside a batch | |`,
  `| p99 beside / alone | ${fmtRatio(beside.p99 / alone.p99)} | <= 1.25x |`,
  ...ingest.rows,
];
log(`done in ${elapsedSeconds().toFixed(0)} s`);
process.stdout.write(`\n${table.join("\n")}\n`);
if (broken) process.exit(1);
process.exit(0);
