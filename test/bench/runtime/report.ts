import { batchingCeiling, type BatchCost } from "./batch-ceiling.js";
import type { ClassificationPoint } from "./classification.js";
import type { GenerationFigures } from "./generation.js";
import { fmt, fmtRatio, ratio } from "./stats.js";

/** The targets of the issue, in one place. */
export const TARGETS = {
  batchingAt32: 3,
  runtimeOverBare: 0.9,
  runtimeOverPeer: 1,
} as const;

function verdict(pass: boolean): string {
  return pass ? "PASS" : "MISS";
}

function rps(
  points: readonly ClassificationPoint[],
  model: string,
  input: string,
  clients: number,
) {
  const at = (mode: string) =>
    points.find(
      (p) => p.model === model && p.input === input && p.clients === clients && p.mode === mode,
    )?.result.requestsPerSecond ?? Number.NaN;
  const on = at("on");
  const off = at("off");
  return { on, off, ratio: ratio(on, off) };
}

/** The final table: figures and ratios of this one run, and PASS/MISS per target. */
export function renderReport(
  classification: readonly ClassificationPoint[],
  costs: readonly BatchCost[],
  generation: GenerationFigures | null,
  load: { before: number; after: number },
): string[] {
  const lines: string[] = [
    `machine load average (1 min) ${load.before.toFixed(2)} before, ${load.after.toFixed(2)} after` +
      " (2 cores: above ~0.5 before the run, other work shared the CPU and figures are noisier)",
  ];
  const groups = [...new Set(classification.map((p) => `${p.model}|${p.input}`))];
  for (const group of groups) {
    const [model, input] = group.split("|") as [string, string];
    const clients = [
      ...new Set(
        classification.filter((p) => `${p.model}|${p.input}` === group).map((p) => p.clients),
      ),
    ];
    const cells = clients.map((n) => {
      const r = rps(classification, model, input, n);
      return `clients=${n} on=${fmt(r.on)} off=${fmt(r.off)} (${fmtRatio(r.ratio)})`;
    });
    const isTarget = model === "tiny-nli" && input === "short";
    const at32 = rps(classification, model, input, 32);
    const target = isTarget
      ? `  ratio@32=${fmtRatio(at32.ratio)} (target ≥${TARGETS.batchingAt32}×) ${verdict(at32.ratio >= TARGETS.batchingAt32)}`
      : "  (informative)";
    lines.push(`classification rps  ${model} ${input} input: ${cells.join("  ")}${target}`);
  }
  for (const cost of costs) {
    const off = rps(classification, cost.model, "short", 32).off;
    lines.push(
      `batching ceiling    ${cost.model}: per request ${fmt(1000 / off)} ms unbatched@32 over HTTP, of which model ` +
        `${fmt(cost.runMsPerRequestAt1)} ms (at batch ${cost.maxBatchSize}: ${fmt(cost.runMsPerRequestAtMax)} ms),` +
        ` tokenizing ${fmt(cost.prepareMs)} ms → at most ${fmtRatio(batchingCeiling(cost, off))} from batching`,
    );
  }
  if (generation) {
    const { runtime, bare, peer } = generation.engines;
    // The verdicts use the paired ratios (see GenerationFigures.paired); the
    // ratio of the medians is printed beside them.
    const { overBare, overPeer } = generation.paired;
    lines.push(
      `generation tok/s    runtime=${fmt(runtime.tokensPerSecond)} bare=${fmt(bare.tokensPerSecond)} peer=${fmt(peer.tokensPerSecond)}` +
        `  runtime/bare=${fmtRatio(overBare)} (target ≥${TARGETS.runtimeOverBare}×) ${verdict(overBare >= TARGETS.runtimeOverBare)}` +
        `  runtime/peer=${fmtRatio(overPeer)} (target >${TARGETS.runtimeOverPeer}×) ${verdict(overPeer > TARGETS.runtimeOverPeer)}`,
    );
    lines.push(
      `                    (ratios: median of per-round pairs; ratio of the medians: runtime/bare=` +
        `${fmtRatio(ratio(runtime.tokensPerSecond, bare.tokensPerSecond))} runtime/peer=` +
        `${fmtRatio(ratio(runtime.tokensPerSecond, peer.tokensPerSecond))})`,
    );
    lines.push(
      `                    ttft ms runtime=${fmt(runtime.firstTokenMs)} bare=${fmt(bare.firstTokenMs)} peer=${fmt(peer.firstTokenMs)}` +
        `   per-token ms runtime=${fmt(runtime.perTokenMs)} bare=${fmt(bare.perTokenMs)} peer=${fmt(peer.perTokenMs)}`,
    );
    lines.push(
      `                    tokens runtime=${runtime.tokens} bare=${bare.tokens} peer=${peer.tokens} (prompt ${generation.promptTokens})` +
        `  same tokens: ${generation.sameTokens ? "yes" : "NO"}  median of ${generation.rounds} rounds;` +
        ` spread runtime=${pct(runtime.spread)} bare=${pct(bare.spread)} peer=${pct(peer.spread)}`,
    );
    lines.push(
      `                    best run tok/s runtime=${fmt(runtime.bestTokensPerSecond)} bare=${fmt(bare.bestTokensPerSecond)}` +
        ` peer=${fmt(peer.bestTokensPerSecond)}  runtime/bare=${fmtRatio(ratio(runtime.bestTokensPerSecond, bare.bestTokensPerSecond))}` +
        ` runtime/peer=${fmtRatio(ratio(runtime.bestTokensPerSecond, peer.bestTokensPerSecond))} (informative: robust to other load)`,
    );
  }
  return lines;
}

function pct(value: number): string {
  return Number.isFinite(value) ? `${(value * 100).toFixed(0)}%` : "n/a";
}
