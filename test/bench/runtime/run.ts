// `npm run bench:runtime [-- --quick] [-- --profile]`: the runtime benchmark.
// (a) classification requests/s with batching on and off, (b) generation
// tokens/s against a bare session.run loop, (c) against transformers.js.
// Phases run one after another, never concurrently; the runtime under test
// always runs in a child process. Prints progress, then one table of figures
// and ratios from this run with PASS/MISS per target. A miss is reported,
// not turned into an exit code; only a broken run exits non-zero.
import { mkdtemp, writeFile } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { generateFixtures } from "../../fixtures/generate.js";
import { measureBatchCost, type BatchCost } from "./batch-ceiling.js";
import { measureClassification, type ClassificationPoint } from "./classification.js";
import { measureGeneration, type GenerationFigures } from "./generation.js";
import { planFrom } from "./plan.js";
import { summarizeProfiles } from "./profile-summary.js";
import { renderReport } from "./report.js";

const plan = planFrom(process.argv.slice(2));
const started = performance.now();
const log = (line: string) => {
  const seconds = ((performance.now() - started) / 1000).toFixed(1).padStart(6);
  process.stdout.write(`[${seconds}s] ${line}\n`);
};

// The last line of defence for "stops by itself": every loop is bounded by
// count and time already; this catches a hang outside them. Runtime children
// exit on their own when this process goes (their stdin closes).
const watchdog = setTimeout(() => {
  log(`benchmark overran its ${plan.deadlineMs / 1000} s deadline; giving up`);
  process.exit(1);
}, plan.deadlineMs);
watchdog.unref();

log(
  `modelgate runtime benchmark (${plan.quick ? "quick" : "full"}): node ${process.version}, ` +
    `${availableParallelism()} cores, threads=${plan.threads}, ` +
    `batch window ${plan.classification.batchOn.batchWindowMs} ms`,
);
const folders = await generateFixtures(undefined, (line) => log(`fixtures: ${line}`));
const nli = folders["tiny-nli"];
const gpt = folders["bench-gpt"];
if (!nli || !gpt) throw new Error("the fixture generator gave no tiny-nli or bench-gpt");
if (!plan.classification.minilmPath) log("classification: all-minilm-l6-v2 not found; skipped");

const loadBefore = loadavg()[0]!;
const classification: ClassificationPoint[] = await measureClassification(plan, nli, log);
// In this process, while no runtime child is alive: the cost behind the ratios.
const costs: BatchCost[] = [];
const classifiers: Array<[string, string | null]> = [
  ["tiny-nli", nli],
  ["all-minilm-l6-v2", plan.classification.minilmPath],
];
for (const [model, path] of classifiers) {
  if (!path) continue;
  const cost = await measureBatchCost(
    model,
    path,
    plan.threads,
    plan.classification.batchOn.maxBatchSize,
  );
  costs.push(cost);
  log(
    `classification ${model} in-process: prepare ${cost.prepareMs.toFixed(3)} ms/request, model run ` +
      `${cost.runMsPerRequestAt1.toFixed(3)} ms/request at batch 1, ` +
      `${cost.runMsPerRequestAtMax.toFixed(3)} at batch ${cost.maxBatchSize}`,
  );
}
const profileDir = plan.profile ? await mkdtemp(join(tmpdir(), "modelgate-bench-prof-")) : null;
const generation: GenerationFigures = await measureGeneration(plan, gpt, profileDir, log);

if (profileDir) {
  for (const summary of await summarizeProfiles(profileDir)) {
    log(
      `profile of the runtime child (main thread, ${Math.round(summary.wallMs)} ms): ${summary.file}`,
    );
    for (const a of summary.areas)
      log(
        `  area ${(a.share * 100).toFixed(1).padStart(5)}%  ${a.ms.toFixed(0).padStart(6)} ms  ${a.name}`,
      );
    for (const f of summary.functions)
      log(
        `  self ${(f.share * 100).toFixed(1).padStart(5)}%  ${f.ms.toFixed(0).padStart(6)} ms  ${f.name}`,
      );
  }
}

const figuresFile = join(await mkdtemp(join(tmpdir(), "modelgate-bench-")), "runtime.json");
const load = { before: loadBefore, after: loadavg()[0]! };
await writeFile(
  figuresFile,
  JSON.stringify({ plan, load, classification, costs, generation }, null, 2),
);
log(
  `done in ${((performance.now() - started) / 1000).toFixed(0)} s; figures as JSON in ${figuresFile}`,
);
process.stdout.write(`\n${renderReport(classification, costs, generation, load).join("\n")}\n`);
