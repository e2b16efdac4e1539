// `npm run bench:extract [-- --quick] [-- --threads N] [-- --rounds N] [-- --point-ms N]`:
// entity extraction on rampart-pii, requests per second at 1, 8 and 32
// clients, our runtime with batching on (max batch 32) and off (max batch 1)
// against transformers.js' token-classification pipeline in one process
// (the peer), with the ratios and each process's peak resident memory.
// Prints progress, then one table of this run's figures. There is no target
// to miss: the exit code is non-zero only when the run itself breaks (an
// engine refuses, fails requests or answers nothing, or our entities differ
// from the peer's). See docs/entity-extraction-bench.md.
import { mkdtemp, writeFile } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { startRun } from "../support/run-clock.js";
import { fmt } from "../runtime/stats.js";
import { measureBatchCost } from "./batch-cost.js";
import { engineName, ENGINES, measureExtraction } from "./measure.js";
import { planFrom } from "./plan.js";
import { extractTable } from "./report.js";

const plan = planFrom(process.argv.slice(2));
const { log, elapsedSeconds } = startRun(plan.deadlineMs);

log(
  `modelgate entity-extraction benchmark (${plan.quick ? "quick" : "full"}): node ${process.version}, ` +
    `${availableParallelism()} cores, threads=${plan.threads}, model ${plan.modelId} (${plan.onnxFile}), ` +
    `clients ${plan.clients.join("/")}, ${plan.rounds} round(s) of ${plan.pointMs} ms per engine and client count; ` +
    `engines: ${ENGINES.map((e) => engineName(e, plan)).join(", ")}`,
);

const loadBefore = loadavg()[0]!;
const figures = await measureExtraction(plan, log);
// In this process, once the servers are gone: the bound behind batching's ratio.
const batchSize = plan.batchOn.maxBatchSize ?? 32;
const cost = await measureBatchCost(plan, batchSize);
log(
  `in-process extractor cost per request: ${fmt(cost.aloneMsPerRequest)} ms run alone, ` +
    `${fmt(cost.batchedMsPerRequest)} ms in a batch of ${batchSize} (median of ${cost.pairs} pairs)`,
);
const load = { before: loadBefore, after: loadavg()[0]! };

const figuresFile = join(await mkdtemp(join(tmpdir(), "modelgate-bench-")), "extract.json");
await writeFile(figuresFile, JSON.stringify({ plan, load, figures, cost }, null, 2));
log(`done in ${elapsedSeconds().toFixed(0)} s; figures as JSON in ${figuresFile}`);
process.stdout.write(`\n${extractTable(figures, cost, load).join("\n")}\n`);

const broken = figures.points.filter((p) => p.result.failed > 0 || p.result.completed === 0);
// Different answers would make the ratios compare different work.
if (figures.sameEntities < figures.sentences) {
  log(
    `broken: the runtime and the peer disagree on ${figures.sentences - figures.sameEntities} sentences (see above)`,
  );
  process.exitCode = 1;
}
if (broken.length > 0) {
  for (const p of broken) {
    log(
      `broken: ${p.engine} at ${p.clients} clients: ${p.result.completed} ok, ${p.result.failed} failed` +
        (p.result.firstFailure ? `, first failure: ${p.result.firstFailure}` : ""),
    );
  }
  process.exit(1);
}
