import { verdict } from "./report.js";
import { fmt, fmtRatio, median, ratio } from "./stats.js";
import type { LlamaFigures, PointSample, PromptFigures } from "./versus-llama.js";

/** The targets of issue "10.", against llama.cpp on the same weights. */
export const LLAMA_TARGETS = {
  /** Our tokens/s over llama.cpp's at 1, 4 and 16 clients, both prompts. */
  tokensPerSecond: 1,
  /** llama.cpp's time to first token over ours. */
  firstToken: 1.5,
  /** Our peak resident memory over llama.cpp's: at most 1. */
  peakMemory: 1,
} as const;

const rate = (s: PointSample) => (s.tokens / s.wallMs) * 1000;

/**
 * One block of rows per prompt, each a ratio from this run: tokens/s per
 * client count, time to first token, per-token time; then peak memory; then
 * the bound measured behind a miss (a full run's decode-step profile).
 */
export function renderLlamaReport(figures: LlamaFigures, bounds: readonly string[]): string[] {
  const lines: string[] = [
    `versus llama.cpp   threads=${figures.threads}, ${figures.rounds} interleaved rounds; ratios are ` +
      "medians of per-round ratios (ours over llama.cpp's, except time to first token: theirs over ours)",
  ];
  for (const prompt of figures.prompts) lines.push(...promptLines(prompt));
  const { runtime, llama } = figures.memory;
  const memory = ratio(runtime.peakMb, llama.peakMb);
  lines.push(
    `  peak memory        runtime ${fmt(runtime.peakMb)} MiB  llama.cpp ${fmt(llama.peakMb)} MiB  ` +
      `runtime/llama=${fmtRatio(memory)} (target ≤${LLAMA_TARGETS.peakMemory}×) ` +
      `${verdict(memory <= LLAMA_TARGETS.peakMemory)}`,
  );
  if (bounds.length > 0) {
    lines.push("  what bounds a miss, from the decode-step profile (step-profile.ts):");
    for (const bound of bounds) lines.push(`    ${bound}`);
  }
  return lines;
}

function promptLines(p: PromptFigures): string[] {
  const tokens = `${p.promptTokens.runtime} prompt tokens (llama.cpp: ${p.promptTokens.llama})`;
  const lines = [`  ${p.kind} prompt, ${tokens}; same greedy text: ${p.sameText ? "yes" : "no"}`];
  for (const point of p.points) {
    const ours = point.samples.runtime;
    const theirs = point.samples.llama;
    const paired = median(ours.map((s, i) => rate(s) / rate(theirs[i]!)));
    lines.push(
      `    tok/s ${String(point.clients).padStart(2)} client${point.clients === 1 ? " " : "s"}` +
        `  runtime ${fmt(median(ours.map(rate)))}  llama.cpp ${fmt(median(theirs.map(rate)))}` +
        `  runtime/llama=${fmtRatio(paired)} (target ≥${LLAMA_TARGETS.tokensPerSecond}×) ` +
        verdict(paired >= LLAMA_TARGETS.tokensPerSecond),
    );
  }
  const ttft = median(p.firstTokenMs.llama.map((t, i) => t / p.firstTokenMs.runtime[i]!));
  lines.push(
    `    first token     runtime ${fmt(median(p.firstTokenMs.runtime))} ms  llama.cpp ` +
      `${fmt(median(p.firstTokenMs.llama))} ms  llama/runtime=${fmtRatio(ttft)} ` +
      `(target ≥${LLAMA_TARGETS.firstToken}×) ${verdict(ttft >= LLAMA_TARGETS.firstToken)}`,
  );
  const single = p.points.find((point) => point.clients === 1);
  if (single) {
    const perToken = (engine: "runtime" | "llama") =>
      median(
        single.samples[engine].map(
          (s, i) => (s.wallMs - p.firstTokenMs[engine][i]!) / Math.max(1, s.tokens - 1),
        ),
      );
    lines.push(
      `    per token       runtime ${fmt(perToken("runtime"))} ms  llama.cpp ${fmt(perToken("llama"))} ms` +
        `  (1 client; after the first token)`,
    );
  }
  return lines;
}
