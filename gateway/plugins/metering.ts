import type { FastifyReply, FastifyRequest } from "fastify";
import type { Usage } from "../../api/runtime-wire.js";
import { costOf } from "../metering/cost.js";
import type { Meter } from "../metering/meter.js";
import type { GatewayMetrics } from "../metrics.js";
import { formatPayUsage, PAY_USAGE_HEADER } from "../pay/pay-usage.js";
import { settlementRecordSchema, type SettlementRecord } from "../pay/settlement.js";
import type { RoutableModel } from "../registry/registry.js";
import { routeConfigOf } from "../routes/route-config.js";
import { paidRequestOf } from "./payment-gate.js";
import { responseIdOf } from "./request-id.js";

/**
 * Bills what a runtime served, as the last step before the answer leaves
 * (`onSend`): a usage record for the key's account, or a settlement with the
 * payment provider (and its `pay-usage` header). Either is journaled durably
 * before the answer is sent and keyed by the response id, so one served
 * request is billed exactly once, and a request the client saw succeed is
 * never missing from billing. A failure to journal is a 500 in place of the
 * answer.
 */
export interface Settlements {
  /** Durable before it resolves; delivered to the provider in the background. */
  settle(record: SettlementRecord): Promise<void>;
}

export interface MeteringParts {
  meter: Meter;
  settlements: Settlements | null;
  metrics: GatewayMetrics;
  now: () => number;
}

/**
 * The `onSend` step that bills what the handler served (`reply.served`);
 * null when nothing was (an error, a stream that bills from its last
 * event), so the hook hands on without a promise.
 */
export function billServed(
  parts: MeteringParts,
): (request: FastifyRequest, reply: FastifyReply) => Promise<void> | null {
  return (request, reply) => {
    const served = reply.served;
    if (!served) return null;
    // Once: an error answered in its place runs this hook again.
    reply.served = null;
    // An error answered in the served answer's place (a failure after the
    // runtime answered) is not what was billed for: nothing is, and the
    // caller's retry is answered, not refused as a replay (payment-gate.ts).
    if (reply.statusCode >= 400) return null;
    return billUsage(parts, request, served.model, served.usage).then((payUsage) => {
      if (payUsage !== null) reply.header(PAY_USAGE_HEADER, payUsage);
    });
  };
}

/**
 * Journals what one request was served, for the caller of its route: a
 * usage record (API key) or a settlement (payment signature). Returns the
 * `pay-usage` value for a settlement, else null. A streamed answer calls it
 * when its terminal event arrives, since its usage is known only then.
 */
export async function billUsage(
  parts: MeteringParts,
  request: FastifyRequest,
  model: RoutableModel,
  usage: Usage,
): Promise<string | null> {
  const mode = routeConfigOf(request).metering;
  const caller = request.caller;
  // Priced as the request is answered: a later price change never reprices it.
  const priced = { cost: costOf(usage, model.prices), currency: model.prices.currency };
  if (mode === "usage" && caller?.kind === "api-key") {
    await parts.meter.record({
      responseId: responseIdOf(request),
      requestId: request.id,
      account: caller.account,
      project: caller.project,
      keyId: caller.keyId,
      model: model.id,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      ...(usage.cachedTokens !== undefined ? { cachedTokens: usage.cachedTokens } : {}),
      ...priced,
      time: new Date(parts.now()).toISOString(),
    });
    return null;
  }
  if (mode === "settlement" && caller?.kind === "pay" && parts.settlements) {
    parts.metrics.payTokens.inc({ model: model.id, direction: "input" }, usage.inputTokens);
    parts.metrics.payTokens.inc({ model: model.id, direction: "output" }, usage.outputTokens);
    // Validated before it is journaled: a bad count fails this request, not the outbox.
    const record = settlementRecordSchema.parse({
      ...paidRequestOf(request, caller, model),
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      ...(usage.cachedTokens !== undefined ? { cachedTokens: usage.cachedTokens } : {}),
      ...priced,
      createdAtMs: parts.now(),
    });
    await parts.settlements.settle(record);
    return formatPayUsage({ slug: model.serviceSlug, ...usage });
  }
  // A route that bills must know whom: serving for free is never the fallback.
  if (mode !== "none")
    throw new Error(`route ${request.routeOptions.url} served without a caller to bill`);
  return null;
}
