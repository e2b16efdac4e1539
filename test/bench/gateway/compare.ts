import type { Child } from "./child-process.js";
import type { LoadRequest } from "../support/closed-loop.js";
import { measuredRun, mergeParts, whenQuiet, type Side } from "./measure.js";
import type { GatewayBenchPlan, RoundPlan } from "./plan.js";
import { fmt, median, ratio } from "../runtime/stats.js";

/**
 * Direct against through-the-gateway, for one runtime and one CPU layout, at
 * each client count. The same request bytes go both ways (the runtime
 * ignores the API key). Each point runs A-B-B-A rounds of halves (direct,
 * gateway, gateway, direct), so that a drift of the machine that is linear
 * over a round lands on both sides equally; each round gives one ratio and
 * one added p50, and the point reports their medians: a slow spell of the
 * machine (another process's burst, a GC) decides one round, not the point.
 */
export type Variant = "shared" | "pinned";

export interface Suite {
  /** "stand-in" or "tiny-nli", with the stores' suffix ("+postgres+valkey"). */
  name: string;
  runtime: Child;
  /** The gateway, or for the floor row the bare proxy (bare-proxy.ts). */
  gateway: Child;
  /** Processes whose CPU is reported besides runtime and gateway (the usage sink). */
  others: readonly Child[];
  requests: readonly LoadRequest[];
}

/** One A-B-B-A round's comparison. */
export interface RoundFigures {
  /** Gateway requests per second over direct's, both halves of each side. */
  throughputRatio: number;
  /** The gateway halves' p50 minus the direct halves'. */
  addedP50Ms: number;
}

export interface ComparePoint {
  suite: string;
  variant: Variant;
  clients: number;
  direct: Side;
  gateway: Side;
  rounds: RoundFigures[];
  /** Medians over `rounds`: what the targets are judged on. */
  throughputRatio: number;
  addedP50Ms: number;
}

export async function compareSuite(
  plan: GatewayBenchPlan,
  suite: Suite,
  variant: Variant,
  rounds: RoundPlan,
  log: (line: string) => void,
): Promise<ComparePoint[]> {
  const watched = [suite.runtime, suite.gateway, ...suite.others];
  const background = [suite.gateway, ...suite.others];
  const half = (origin: string, clients: number, durationMs: number) =>
    measuredRun(
      origin,
      suite.requests,
      { clients, durationMs, maxRequests: plan.halfMaxRequests },
      watched,
    );
  // Warm-up at the middle client count: JIT on every side, pooled connections,
  // the journal's first writes. The gateway's is longer and is followed by a
  // longer wait for quiet: the embedded ledger's WebAssembly is compiled
  // again, optimised, on V8's background threads once its code runs hot,
  // for seconds of CPU in the first seconds of traffic. That one-time cost
  // is not the gateway's cost per request.
  await half(suite.runtime.url, 16, plan.warmupMs);
  await measuredRun(
    suite.gateway.url,
    suite.requests,
    { clients: 16, durationMs: plan.gatewayWarmupMs, maxRequests: plan.halfMaxRequests },
    watched,
    { children: background, maxMs: plan.warmupSettleMaxMs },
  );
  const cpuOf = async () => Promise.all(background.map((c) => c.cpuSeconds()));
  const points: ComparePoint[] = [];
  for (const clients of plan.clients) {
    const direct = [];
    const gateway = [];
    const figures: RoundFigures[] = [];
    const before = await cpuOf();
    for (let round = 0; round < rounds.rounds; round++) {
      const a1 = await half(suite.runtime.url, clients, rounds.halfMs);
      const b1 = await half(suite.gateway.url, clients, rounds.halfMs);
      const b2 = await half(suite.gateway.url, clients, rounds.halfMs);
      const a2 = await half(suite.runtime.url, clients, rounds.halfMs);
      direct.push(a1, a2);
      gateway.push(b1, b2);
      const [d, g] = [mergeParts([a1, a2]), mergeParts([b1, b2])];
      figures.push({
        throughputRatio: ratio(g.requestsPerSecond, d.requestsPerSecond),
        addedP50Ms: g.p50Ms - d.p50Ms,
      });
    }
    // The gateway's work after its answers (the outbox's ledger batches, the
    // exporter's deliveries, the journal's syncs) runs on during the direct
    // halves that follow and after the last half. All of the gateway's, the
    // sink's and the stores' CPU from the point's start to the first quiet
    // moment after it is charged to the gateway side: an idle gateway's own
    // timers, a few per cent of a core during the direct halves, make this
    // an upper bound.
    await whenQuiet(background, plan.settleMaxMs);
    const after = await cpuOf();
    const charged = Object.fromEntries(background.map((c, i) => [c.name, after[i]! - before[i]!]));
    const point: ComparePoint = {
      suite: suite.name,
      variant,
      clients,
      direct: mergeParts(direct),
      gateway: mergeParts(gateway, charged),
      rounds: figures,
      throughputRatio: median(figures.map((f) => f.throughputRatio)),
      addedP50Ms: median(figures.map((f) => f.addedP50Ms)),
    };
    points.push(point);
    for (const side of ["direct", "gateway"] as const) {
      log(
        `${suite.name} ${variant} clients=${clients} ${side.padEnd(7)}: ${describeSide(point[side], side === "gateway")}`,
      );
    }
    log(
      `${suite.name} ${variant} clients=${clients} ratio median ${point.throughputRatio.toFixed(3)} ` +
        `over ${figures.length} rounds (${figures.map((f) => f.throughputRatio.toFixed(2)).join(" ")})`,
    );
  }
  return points;
}

export function describeSide(side: Side, viaGateway: boolean): string {
  const cpu = Object.entries(side.cpuShare)
    .map(([name, share]) => `${name} ${fmt(share * 100)}%`)
    .join(" ");
  const gatewayMs = viaGateway ? side.cpuMsPerRequest.gateway : undefined;
  return (
    `${fmt(side.requestsPerSecond)} req/s, p50 ${side.p50Ms.toFixed(3)} ms, p99 ${side.p99Ms.toFixed(3)} ms ` +
    `(${side.completed} ok, ${side.failed} failed; cpu ${cpu}` +
    (gatewayMs !== undefined ? `; gateway ${gatewayMs.toFixed(3)} ms cpu/request)` : ")") +
    (side.firstFailure ? ` first failure: ${side.firstFailure}` : "")
  );
}
