import { formatPaySignature, signPayload } from "../../../gateway/pay/signature.js";
import type { Child } from "./child-process.js";
import type { LoadRequest } from "../support/closed-loop.js";
import { describeSide } from "./compare.js";
import type { GatewaySetup } from "./gateway-files.js";
import { measuredRun, mergeParts, type Side } from "./measure.js";
import type { GatewayBenchPlan } from "./plan.js";

/**
 * The payment route, informative: each request costs the gateway an
 * allowance check (an HTTP call to the provider stand-in, awaited), the
 * forward, and a settlement journaled with fsync before the answer leaves.
 * The gateway accepts a payment signature once, so every request of the
 * run is a body of its own (a `metadata.bench` counter), signed up front with
 * a fresh timestamp, well inside the gateway's tolerance for a run of a few
 * minutes, so the client does no HMAC work while it measures. Each run takes
 * its own slice of them and stops at its end.
 */
export const PAY_REQUESTS_PER_RUN = 40_000;

export interface PayPoint {
  clients: number;
  side: Side;
}

export function payRequests(template: string, setup: GatewaySetup, count: number): LoadRequest[] {
  const t = Math.floor(Date.now() / 1000);
  const base = JSON.parse(template) as Record<string, unknown>;
  return Array.from({ length: count }, (_, i) => {
    const body = JSON.stringify({ ...base, metadata: { bench: String(i) } });
    return {
      path: "/pay/v1/responses",
      headers: {
        "content-type": "application/json",
        "pay-signature": formatPaySignature({
          t,
          kid: setup.kid,
          v1: [signPayload(body, setup.secret)],
        }),
        "pay-agent-id": `bench-agent-${i % 16}`,
      },
      body,
    };
  });
}

export async function measurePay(
  plan: GatewayBenchPlan,
  gateway: Child,
  watched: readonly Child[],
  requests: readonly LoadRequest[],
  log: (line: string) => void,
): Promise<PayPoint[]> {
  let runs = 0;
  const run = (clients: number, durationMs: number) => {
    // A slice no earlier run sent: a signature used before would be refused.
    const slice = requests.slice(runs * PAY_REQUESTS_PER_RUN, ++runs * PAY_REQUESTS_PER_RUN);
    return measuredRun(
      gateway.url,
      slice,
      { clients, durationMs, maxRequests: Math.min(plan.halfMaxRequests, slice.length) },
      watched,
      // The gateway's outbox delivers settlements to the provider after the answer.
      { children: watched.filter((c) => c.name !== "runtime"), maxMs: plan.settleMaxMs },
    );
  };
  await run(16, plan.warmupMs);
  const points: PayPoint[] = [];
  for (const clients of plan.payClients) {
    const side = mergeParts([await run(clients, plan.payPointMs)]);
    points.push({ clients, side });
    log(
      `pay route (stand-in runtime and provider) clients=${clients}: ${describeSide(side, true)}`,
    );
  }
  return points;
}
