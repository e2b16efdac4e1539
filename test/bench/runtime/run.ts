// `npm run bench:runtime [-- --quick] [-- --real] [-- --real-only] [-- --profile]`:
// the runtime benchmark. Fixture section: (a) classification requests/s with
// batching on and off (bench-nli is the target; tiny-nli informative), (b)
// generation tokens/s against a bare session.run loop, (c) against
// transformers.js. Real section (when ../shared/models holds the models):
// the same on SmolLM2 plus concurrent generation, MiniLM classification and
// resident memory. Versus llama.cpp (when ../shared/models holds the int4
// build): our runtime against llama-server on the same weights. Phases run one after another, never concurrently; the
// runtime under test always runs in a child process. Prints progress, then
// one table of figures and ratios from this run with PASS/MISS per target. A
// miss is reported, not turned into an exit code; only a broken run exits
// non-zero.
import { mkdtemp, writeFile } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { generateFixtures } from "../../fixtures/generate.js";
import { measureBatchCost, type BatchCost } from "./batch-ceiling.js";
import { measureClassification, type ClassificationRun, type Suite } from "./classification.js";
import { measureGeneration, type GenerationFigures } from "./generation.js";
import { PROMPT_CANDIDATES } from "./generation-prompt.js";
import { planFrom, type BenchPlan } from "./plan.js";
import { summarizeProfiles } from "./profile-summary.js";
import { measureReal, type RealFigures } from "./real.js";
import { renderRealReport } from "./real-report.js";
import { llamaBuildFor, measureVersusLlama, type LlamaFigures } from "./versus-llama.js";
import { renderLlamaReport } from "./versus-llama-report.js";
import { profileSteps, stepProfileLines, type StepProfile } from "./step-profile.js";
import { classificationLines, generationLines, loadLine, TARGETS } from "./report.js";
import { fmt } from "./stats.js";
import { startRun } from "../support/run-clock.js";

const plan = planFrom(process.argv.slice(2));
const { log, elapsedSeconds } = startRun(plan.deadlineMs);

log(
  `modelgate runtime benchmark (${plan.quick ? "quick" : "full"}): node ${process.version}, ` +
    `${availableParallelism()} cores, threads=${plan.threads}, ` +
    `batch window ${plan.classification.batchOn.batchWindowMs} ms; sections: ` +
    [plan.fixtures && "fixtures", plan.real && "real models", plan.llama && "versus llama.cpp"]
      .filter(Boolean)
      .join(" + "),
);
if (!plan.real) log("real models: skipped (--quick without --real, or ../shared/models missing)");
if (!plan.llama)
  log(
    "versus llama.cpp: skipped (--no-llama, or no smollm2-135m-instruct-int4 in ../shared/models)",
  );

interface FixtureFigures {
  classification: ClassificationRun;
  costs: BatchCost[];
  generation: GenerationFigures[];
}

async function measureFixtures(p: BenchPlan): Promise<FixtureFigures> {
  const folders = await generateFixtures(undefined, (line) => log(`fixtures: ${line}`));
  const path = (name: string) => {
    const folder = folders[name];
    if (!folder) throw new Error(`the fixture generator gave no ${name}`);
    return folder;
  };
  const c = p.classification;
  const shortPoints = c.clients.map((clients) => ({ input: "short" as const, clients }));
  const suites: Suite[] = [
    {
      model: "bench-nli",
      path: path("bench-nli"),
      pointMs: c.benchNliPointMs,
      points: shortPoints,
    },
    {
      model: "tiny-nli",
      path: path("tiny-nli"),
      pointMs: c.pointMs,
      points: [
        ...shortPoints,
        ...c.longClients.map((clients) => ({ input: "long" as const, clients })),
      ],
    },
  ];
  const classification = await measureClassification(p, suites, log);
  // In this process, while no runtime child is alive: the cost behind the ratios.
  const costs: BatchCost[] = [];
  for (const suite of suites) {
    const cost = await measureBatchCost(suite.model, suite.path, p.threads, c.batchOn.maxBatchSize);
    costs.push(cost);
    log(
      `classification ${suite.model} in-process: prepare ${fmt(cost.prepareMs)} ms/request, model run ` +
        `${fmt(cost.runMsPerRequestAt1)} ms/request at batch 1, ${fmt(cost.runMsPerRequestAtMax)} at batch ${cost.maxBatchSize}`,
    );
  }
  const profileDir = p.profile ? await mkdtemp(join(tmpdir(), "modelgate-bench-prof-")) : null;
  const g = p.generation;
  const generation = await measureGeneration(
    p,
    {
      modelId: "bench-gpt",
      folder: path("bench-gpt"),
      onnxFile: "onnx/model.onnx",
      peerDtype: "fp32",
      cases: [
        {
          name: "chat prompt",
          candidates: PROMPT_CANDIDATES,
          warmupRounds: g.warmupRounds,
          rounds: g.rounds,
          firstTokenSamples: g.firstTokenSamples,
        },
      ],
    },
    profileDir,
    log,
  );
  if (profileDir) await logProfiles(profileDir);
  return { classification, costs, generation };
}

async function logProfiles(dir: string): Promise<void> {
  for (const summary of await summarizeProfiles(dir)) {
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

const loadBefore = loadavg()[0]!;
const fixtures = plan.fixtures ? await measureFixtures(plan) : null;
const real: RealFigures | null = plan.real ? await measureReal(plan, plan.real, log) : null;
const llamaBuild = plan.llama ? await llamaBuildFor(plan.llama, log) : null;
const llama: LlamaFigures | null =
  plan.llama && llamaBuild ? await measureVersusLlama(plan, plan.llama, llamaBuild, log) : null;
// What bounds a decode step, Node against Python on the same engine: the
// measured bound printed under the comparison (full runs only: ~2 minutes).
const steps: StepProfile[] | null =
  llama && plan.llama && !plan.quick
    ? await profileSteps(
        {
          folder: plan.llama.modelPath,
          threads: plan.threads,
          rounds: 2,
          pasts: llama.prompts.map((p) => p.promptTokens.runtime + plan.generation.newTokens / 2),
          batches: [1, plan.llama.sequences],
          steps: 20,
        },
        log,
      )
    : null;

const figuresFile = join(await mkdtemp(join(tmpdir(), "modelgate-bench-")), "runtime.json");
const load = { before: loadBefore, after: loadavg()[0]! };
await writeFile(figuresFile, JSON.stringify({ plan, load, fixtures, real, llama, steps }, null, 2));
log(`done in ${elapsedSeconds().toFixed(0)} s; figures as JSON in ${figuresFile}`);

const lines = [loadLine(load)];
if (fixtures) {
  lines.push(...classificationLines(fixtures.classification.points, fixtures.costs, "bench-nli"));
  for (const g of fixtures.generation) lines.push(...generationLines(g, TARGETS.runtimeOverBare));
}
if (real) lines.push(...renderRealReport(real));
if (llama) lines.push(...renderLlamaReport(llama, steps ? stepProfileLines(steps) : []));
else if (plan.llama)
  lines.push("versus llama.cpp   skipped: llama-server is not built (see above)");
process.stdout.write(`\n${lines.join("\n")}\n`);
