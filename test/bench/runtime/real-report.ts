import { MINILM } from "./plan.js";
import type { Memory } from "./runtime-process.js";
import type { RealFigures } from "./real.js";
import type { ConcurrentFigures, ConcurrentPoint } from "./real-concurrent.js";
import { classificationLines, generationLines, TARGETS, verdict } from "./report.js";
import { fmt, fmtRatio, ratio } from "./stats.js";

/** The real-model section of the final table, with the bound behind each miss. */
export function renderRealReport(real: RealFigures): string[] {
  const lines: string[] = [];
  for (const g of real.generation) lines.push(...generationLines(g, TARGETS.realOverBare));
  lines.push(...concurrentLines(real.concurrent));
  lines.push(...classificationLines(real.classification.points, real.costs, MINILM));
  for (const m of real.classification.memory) {
    lines.push(
      `memory              ${m.model} runtime child: idle ${mb(m.idle)}, after the 32-client points ${mb(m.after)}`,
    );
  }
  return lines;
}

function concurrentLines(c: ConcurrentFigures): string[] {
  const lines: string[] = [];
  const find = (engine: string, concurrency: number | null, clients: number) =>
    c.points.find(
      (p) => p.engine === engine && p.concurrency === concurrency && p.clients === clients,
    );
  const cell = (p: ConcurrentPoint | undefined) =>
    p
      ? `clients=${p.clients} ${fmt(p.tokensPerSecond)} tok/s (p50 ${fmt(p.p50Ms / 1000)} s, p99 ${fmt(p.p99Ms / 1000)} s)`
      : "n/a";
  const modes = [
    ...new Set(c.points.filter((p) => p.engine === "runtime").map((p) => p.concurrency)),
  ];
  for (const concurrency of modes) {
    const points = c.points.filter((p) => p.engine === "runtime" && p.concurrency === concurrency);
    lines.push(
      `concurrent gen      runtime --generation-concurrency ${concurrency}: ${points.map(cell).join("  ")}`,
    );
  }
  const peer = c.points.find((p) => p.engine === "peer");
  lines.push(`concurrent gen      peer (${peer?.clients ?? "?"} calls at once): ${cell(peer)}`);

  const batched = Math.max(...modes.filter((m): m is number => m !== null));
  const single = find("runtime", batched, 1);
  const many = c.points
    .filter((p) => p.engine === "runtime" && p.concurrency === batched)
    .sort((a, b) => b.clients - a.clients)[0];
  const overSingle = ratio(many?.tokensPerSecond ?? NaN, single?.tokensPerSecond ?? NaN);
  const overPeer = ratio(many?.tokensPerSecond ?? NaN, peer?.tokensPerSecond ?? NaN);
  const at = `${many?.clients ?? "?"} clients`;
  lines.push(
    `                    at ${at}: over our 1 client ${fmtRatio(overSingle)} (target ≥${TARGETS.concurrentOverSingle}× at 16) ` +
      `${verdict(overSingle >= TARGETS.concurrentOverSingle)}  over the peer at ${peer?.clients ?? "?"} ` +
      `${fmtRatio(overPeer)} (target ≥${TARGETS.concurrentOverPeer}×) ${verdict(overPeer >= TARGETS.concurrentOverPeer)}`,
  );
  const s = c.step;
  lines.push(
    `                    bound: in-process decode step at past ${s.pastLength}: batch 1 ${fmt(s.batch1Ms)} ms, ` +
      `batch ${s.batch} ${fmt(s.batchMs)} ms → batched decoding gives at most ` +
      `${fmtRatio((s.batch * s.batch1Ms) / s.batchMs)} the tokens/s of one sequence at a time`,
  );
  for (const m of c.memory) {
    const after = m.after.map((a) => `after ${a.clients} clients ${mb(a.memory)}`).join(", ");
    lines.push(
      `memory              smollm2 runtime child (concurrency ${m.concurrency}): idle ${mb(m.idle)}, ${after}` +
        " (one mapped model whatever the concurrency; growth is KV cache and activations)",
    );
  }
  return lines;
}

function mb(m: Memory): string {
  return `RSS ${fmt(m.rssMb)} MiB (peak ${fmt(m.peakMb)} MiB)`;
}
