import type { Child } from "./child-process.js";
import type { LoadRequest } from "../support/closed-loop.js";
import { measuredRun, mergeParts, type Side } from "./measure.js";
import type { GatewayBenchPlan } from "./plan.js";
import { fmt } from "../runtime/stats.js";

/**
 * Direct against through-the-gateway, for one runtime and one CPU layout, at
 * each client count. The same request bytes go both ways (the runtime
 * ignores the API key). Each point runs A-B-B-A in halves (direct, gateway,
 * gateway, direct), `plan.rounds` times, so a drift of the machine that is
 * linear over a round lands on both sides equally.
 */
export type Variant = "shared" | "pinned";

export interface Suite {
  /** "stand-in" or "tiny-nli". */
  name: string;
  runtime: Child;
  gateway: Child;
  /** Processes whose CPU is reported besides runtime and gateway (the usage sink). */
  others: readonly Child[];
  requests: readonly LoadRequest[];
}

export interface ComparePoint {
  suite: string;
  variant: Variant;
  clients: number;
  direct: Side;
  gateway: Side;
}

export async function compareSuite(
  plan: GatewayBenchPlan,
  suite: Suite,
  variant: Variant,
  log: (line: string) => void,
): Promise<ComparePoint[]> {
  const watched = [suite.runtime, suite.gateway, ...suite.others];
  const background = [suite.gateway, ...suite.others];
  // `settle`: wait for the gateway's background work before the reading. Only
  // the second gateway half needs it: the first half's leftover lands in the
  // second, on the same side, and the direct half that follows starts quiet.
  const half = (origin: string, clients: number, durationMs: number, settle = false) =>
    measuredRun(
      origin,
      suite.requests,
      { clients, durationMs, maxRequests: plan.halfMaxRequests },
      watched,
      { children: settle ? background : [], maxMs: plan.settleMaxMs },
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
  const points: ComparePoint[] = [];
  for (const clients of plan.clients) {
    const halfMs = plan.pointMs / 2;
    const direct = [];
    const gateway = [];
    // Several A-B-B-A rounds: a slow spell of the machine that lasts seconds
    // lands on both sides, instead of deciding the point.
    for (let round = 0; round < plan.rounds; round++) {
      direct.push(await half(suite.runtime.url, clients, halfMs));
      gateway.push(await half(suite.gateway.url, clients, halfMs));
      gateway.push(await half(suite.gateway.url, clients, halfMs, true));
      direct.push(await half(suite.runtime.url, clients, halfMs));
    }
    const point: ComparePoint = {
      suite: suite.name,
      variant,
      clients,
      direct: mergeParts(direct),
      gateway: mergeParts(gateway),
    };
    points.push(point);
    for (const side of ["direct", "gateway"] as const) {
      log(
        `${suite.name} ${variant} clients=${clients} ${side.padEnd(7)}: ${describeSide(point[side], side === "gateway")}`,
      );
    }
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
