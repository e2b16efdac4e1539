import { batchingCeiling, type BatchCost } from "./batch-ceiling.js";
import type { ClassificationPoint } from "./classification.js";
import type { GenerationFigures } from "./generation.js";
import { fmt, fmtRatio, ratio } from "./stats.js";

/** The targets of the issues ("1. runtime", "1b. real models"), in one place. */
export const TARGETS = {
  batchingAt32: 3,
  /** bench-gpt, the fixture decoder. */
  runtimeOverBare: 0.9,
  /** SmolLM2, the real decoder. */
  realOverBare: 0.95,
  runtimeOverPeer: 1,
  /** Aggregate tokens/s at 16 clients over our own at 1, and over the peer's at 16. */
  concurrentOverSingle: 2,
  concurrentOverPeer: 2,
} as const;

export function verdict(pass: boolean): string {
  return pass ? "PASS" : "MISS";
}

export function rps(
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

/**
 * One line per model and input, then the Amdahl ceiling of each measured
 * cost. The short-input line of `targetModel` carries the batching verdict.
 */
export function classificationLines(
  classification: readonly ClassificationPoint[],
  costs: readonly BatchCost[],
  targetModel: string,
): string[] {
  const lines: string[] = [];
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
    const isTarget = model === targetModel && input === "short";
    const at32 = rps(classification, model, input, 32);
    const target = isTarget
      ? `  ratio@32=${fmtRatio(at32.ratio)} (target ≥${TARGETS.batchingAt32}×) ${verdict(at32.ratio >= TARGETS.batchingAt32)}`
      : `  ratio@32=${fmtRatio(at32.ratio)} (informative)`;
    lines.push(`classification rps  ${model} ${input} input: ${cells.join("  ")}${target}`);
  }
  for (const cost of costs) {
    const off = rps(classification, cost.model, "short", 32).off;
    lines.push(
      `batching ceiling    ${cost.model}: per request ${fmt(1000 / off)} ms unbatched@32 over HTTP, of which model ` +
        `${fmt(cost.runMsPerRequestAt1)} ms (at batch ${cost.maxBatchSize}: ${fmt(cost.runMsPerRequestAtMax)} ms, ` +
        `${fmtRatio(ratio(cost.runMsPerRequestAt1, cost.runMsPerRequestAtMax))} cheaper), tokenizing ` +
        `${fmt(cost.prepareMs)} ms → at most ${fmtRatio(batchingCeiling(cost, off))} from batching`,
    );
  }
  return lines;
}

/** The single-client comparison of one generation case against the bare loop and the peer. */
export function generationLines(g: GenerationFigures, overBareTarget: number): string[] {
  const { runtime, bare, peer } = g.engines;
  // The verdicts use the paired ratios (see GenerationFigures.paired); the
  // ratio of the medians is printed beside them.
  const { overBare, overPeer } = g.paired;
  const lines = [
    `generation tok/s    ${g.label}: runtime=${fmt(runtime.tokensPerSecond)} bare=${fmt(bare.tokensPerSecond)} peer=${fmt(peer.tokensPerSecond)}` +
      `  runtime/bare=${fmtRatio(overBare)} (target ≥${overBareTarget}×) ${verdict(overBare >= overBareTarget)}` +
      `  runtime/peer=${fmtRatio(overPeer)} (target ≥${TARGETS.runtimeOverPeer}×) ${verdict(overPeer >= TARGETS.runtimeOverPeer)}`,
    `                    (ratios: median of per-round pairs; ratio of the medians: runtime/bare=` +
      `${fmtRatio(ratio(runtime.tokensPerSecond, bare.tokensPerSecond))} runtime/peer=` +
      `${fmtRatio(ratio(runtime.tokensPerSecond, peer.tokensPerSecond))})`,
    `                    ttft ms runtime=${fmt(runtime.firstTokenMs)} bare=${fmt(bare.firstTokenMs)} peer=${fmt(peer.firstTokenMs)}` +
      `   per-token ms runtime=${fmt(runtime.perTokenMs)} bare=${fmt(bare.perTokenMs)} peer=${fmt(peer.perTokenMs)}`,
    `                    tokens runtime=${runtime.tokens} bare=${bare.tokens} peer=${peer.tokens} (prompt ${g.promptTokens})` +
      `  same tokens: ${g.sameTokens ? "yes" : "NO"}  median of ${g.rounds} rounds;` +
      ` spread runtime=${pct(runtime.spread)} bare=${pct(bare.spread)} peer=${pct(peer.spread)}`,
    `                    best run tok/s runtime=${fmt(runtime.bestTokensPerSecond)} bare=${fmt(bare.bestTokensPerSecond)}` +
      ` peer=${fmt(peer.bestTokensPerSecond)}  runtime/bare=${fmtRatio(ratio(runtime.bestTokensPerSecond, bare.bestTokensPerSecond))}` +
      ` runtime/peer=${fmtRatio(ratio(runtime.bestTokensPerSecond, peer.bestTokensPerSecond))} (informative: robust to other load)`,
  ];
  if (overBare < overBareTarget || overPeer < TARGETS.runtimeOverPeer) {
    // What the gap is made of: time before the first token, and per token after it.
    const gap = (a: number, b: number) => `${a - b >= 0 ? "+" : ""}${fmt(a - b)} ms`;
    lines.push(
      `                    bound: the runtime's time over bare is first token ${gap(runtime.firstTokenMs, bare.firstTokenMs)}` +
        ` and per token ${gap(runtime.perTokenMs, bare.perTokenMs)} (HTTP, tokenizer, scheduler); over peer` +
        ` first token ${gap(runtime.firstTokenMs, peer.firstTokenMs)}, per token ${gap(runtime.perTokenMs, peer.perTokenMs)}`,
    );
  }
  return lines;
}

function pct(value: number): string {
  return Number.isFinite(value) ? `${(value * 100).toFixed(0)}%` : "n/a";
}

export function loadLine(load: { before: number; after: number }): string {
  return (
    `machine load average (1 min) ${load.before.toFixed(2)} before, ${load.after.toFixed(2)} after` +
    " (2 cores: above ~0.5 before the run, other work shared the CPU and figures are noisier)"
  );
}
