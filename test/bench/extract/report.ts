import { fmt, fmtRatio, median, quantile, ratio } from "../runtime/stats.js";
import type { BatchCost } from "./batch-cost.js";
import { ENGINES, type Engine, type ExtractFigures, type ExtractPoint } from "./measure.js";

/**
 * The table of one run: requests per second per engine and client count
 * (all of a point's requests over all of its time, rounds pooled), p50
 * latency, and the ratios. A ratio is the median of per-round ratios: the
 * engines of one round run seconds apart and see the same background load.
 */
export interface ExtractRow {
  clients: number;
  rps: Record<Engine, number>;
  p50Ms: Record<Engine, number>;
  onOverPeer: number;
  offOverPeer: number;
  onOverOff: number;
}

function pooled(points: readonly ExtractPoint[]): { rps: number; p50Ms: number } {
  const completed = points.reduce((n, p) => n + p.result.completed, 0);
  const ms = points.reduce((n, p) => n + p.result.elapsedMs, 0);
  return {
    rps: ms > 0 ? (completed / ms) * 1000 : Number.NaN,
    p50Ms: median(points.map((p) => p.result.p50Ms)),
  };
}

function pairedRatio(points: readonly ExtractPoint[], top: Engine, bottom: Engine): number {
  const rounds = [...new Set(points.map((p) => p.round))];
  const ratios = rounds.map((round) => {
    const at = (engine: Engine) =>
      points.find((p) => p.round === round && p.engine === engine)?.result.requestsPerSecond ??
      Number.NaN;
    return ratio(at(top), at(bottom));
  });
  return quantile(
    ratios.filter((r) => Number.isFinite(r)),
    0.5,
  );
}

export function extractRows(figures: ExtractFigures): ExtractRow[] {
  const clientCounts = [...new Set(figures.points.map((p) => p.clients))];
  return clientCounts.map((clients) => {
    const atClients = figures.points.filter((p) => p.clients === clients);
    const per = (engine: Engine) => pooled(atClients.filter((p) => p.engine === engine));
    const rps = {} as Record<Engine, number>;
    const p50Ms = {} as Record<Engine, number>;
    for (const engine of ENGINES) {
      const { rps: r, p50Ms: p } = per(engine);
      rps[engine] = r;
      p50Ms[engine] = p;
    }
    return {
      clients,
      rps,
      p50Ms,
      onOverPeer: pairedRatio(atClients, "on", "peer"),
      offOverPeer: pairedRatio(atClients, "off", "peer"),
      onOverOff: pairedRatio(atClients, "on", "off"),
    };
  });
}

const pad = (s: string, n: number) => s.padStart(n);

export function extractTable(
  figures: ExtractFigures,
  cost: BatchCost,
  load: { before: number; after: number },
): string[] {
  const header =
    `${pad("clients", 7)} | ${pad("on req/s", 9)} ${pad("off req/s", 9)} ${pad("peer req/s", 10)} | ` +
    `${pad("on/peer", 8)} ${pad("off/peer", 8)} ${pad("on/off", 8)} | ` +
    `${pad("p50 on", 7)} ${pad("off", 7)} ${pad("peer", 7)} ms`;
  const lines = [
    `machine load average (1 min) ${load.before.toFixed(2)} before, ${load.after.toFixed(2)} after` +
      " (2 cores: above ~0.5 before the run, other work shared the CPU and figures are noisier)",
    "",
    header,
    "-".repeat(header.length),
  ];
  for (const row of extractRows(figures)) {
    lines.push(
      `${pad(String(row.clients), 7)} | ${pad(fmt(row.rps.on), 9)} ${pad(fmt(row.rps.off), 9)} ` +
        `${pad(fmt(row.rps.peer), 10)} | ${pad(fmtRatio(row.onOverPeer), 8)} ` +
        `${pad(fmtRatio(row.offOverPeer), 8)} ${pad(fmtRatio(row.onOverOff), 8)} | ` +
        `${pad(fmt(row.p50Ms.on), 7)} ${pad(fmt(row.p50Ms.off), 7)} ${pad(fmt(row.p50Ms.peer), 7)}`,
    );
  }
  lines.push("");
  for (const m of figures.memory) {
    lines.push(
      `memory ${m.engine.padEnd(4)}: peak resident ${fmt(m.after.peakMb)} MiB ` +
        `(idle after warm-up ${fmt(m.idle.rssMb)} MiB, at the end ${fmt(m.after.rssMb)} MiB)`,
    );
  }
  lines.push(
    `batching bound: the extractor (model run, softmax, joining; no HTTP) costs ` +
      `${fmt(cost.aloneMsPerRequest)} ms a request run alone and ${fmt(cost.batchedMsPerRequest)} ms ` +
      `in a batch of ${cost.batchSize}: batching can make the model's part at most ` +
      `${fmtRatio(ratio(cost.aloneMsPerRequest, cost.batchedMsPerRequest))} faster`,
  );
  lines.push(
    `same entities as the peer on ${figures.sameEntities} of ${figures.sentences} sentences` +
      " (batching on and off, at the default threshold)",
  );
  return lines;
}
