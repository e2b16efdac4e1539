import type {
  FastifyReply,
  FastifyRequest,
  onResponseHookHandler,
  preHandlerAsyncHookHandler,
} from "fastify";
import type { CodedError } from "../../lib/coded-error.js";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import { GatewayErrors } from "../errors.js";
import type { GatewayMetrics } from "../metrics.js";
import { tokenBucketLimits, type RateLimits } from "../rate-limit/limits.js";
import type { BucketState, BucketTake, LimitDecision, Limiter } from "../rate-limit/limiter.js";
import { setRateLimitHeaders, type LimitUnit } from "../rate-limit/rate-limit-headers.js";
import type { ApiKeyCaller } from "../routes/caller.js";
import { routeConfigOf } from "../routes/route-config.js";
import { mostTokens, type BillableBody } from "../metering/most-tokens.js";

/**
 * Rate limits per caller, in requests and (when configured) tokens a
 * minute, from whichever limiter the gateway runs (this process's buckets,
 * or Valkey's shared by every replica). Where each check runs follows the
 * spec's order of answers: an API key's requests (and its project's, when
 * the account limits the project) right after the key is known
 * (401 → 403 → 429 → 400), their tokens once the body is admitted (the
 * reservation needs the model and `max_output_tokens`); a buying agent's
 * both at once, after the body is judged (401 → 400 → 429 → 402). A token
 * reservation is settled with the real count as the answer leaves.
 */
export interface RateLimitParts {
  limiter: Limiter;
  /** Limits of a caller without its own (an agent, or a key without `rateLimit`). */
  defaults: RateLimits;
  metrics: GatewayMetrics;
  /** The most bytes forwarded to a runtime (the body limit), which bounds a continuation. */
  bodyLimit: number;
}

/** Tokens reserved for a request in one bucket, to settle once its usage is known. */
interface TokenReservation {
  id: string;
  limits: RateLimits;
  reserved: number;
}

declare module "fastify" {
  interface FastifyRequest {
    tokenReservations: TokenReservation[] | null;
    /** A stream's usage, from its last event, for the settlement when it ends. */
    streamedUsage: { inputTokens: number; outputTokens: number } | null;
  }
}

/** One bucket of a decision, and which headers it feeds. */
interface Bucket {
  unit: LimitUnit;
  take: BucketTake;
}

function refusal(
  request: FastifyRequest,
  parts: RateLimitParts,
  decision: LimitDecision,
): CodedError {
  parts.metrics.rateLimited.inc({ route: routeConfigOf(request).metricsName ?? "" });
  return GatewayErrors.rateLimited(decision.ok ? 1 : decision.retryAfterSeconds);
}

/** The token limit that applies: the caller's own, else the default; none when neither sets one. */
function tokensPerMinuteOf(own: RateLimits | undefined, defaults: RateLimits): number | undefined {
  return own?.tokensPerMinute ?? defaults.tokensPerMinute;
}

/** The most tokens the admitted request can use. */
function mostTokensOf(request: FastifyRequest, parts: RateLimitParts): number {
  return mostTokens(request.body as BillableBody, request.model, parts.bodyLimit);
}

/**
 * A token bucket's take: the request's most tokens, capped at the bucket (a
 * bigger request waits for a full bucket, then owes the rest); 0 to read the
 * balance before the body is known.
 */
function tokenTake(id: string, tokensPerMinute: number, most: number): Bucket {
  const limits = tokenBucketLimits(tokensPerMinute);
  return { unit: "tokens", take: { id, limits, cost: Math.min(most, limits.burst) } };
}

/**
 * Takes every bucket or none, sets the headers (for each unit, the bucket
 * with the least left: the one the caller meets first), and refuses with
 * 429 when one lacks room. Records the token reservations to settle.
 */
async function decide(
  request: FastifyRequest,
  reply: FastifyReply,
  parts: RateLimitParts,
  buckets: readonly Bucket[],
): Promise<void> {
  if (buckets.length === 0) return;
  const decision = await parts.limiter.take(buckets.map((bucket) => bucket.take));
  const tightest = new Map<LimitUnit, BucketState>();
  buckets.forEach((bucket, i) => {
    const state = decision.states[i]!;
    const held = tightest.get(bucket.unit);
    if (!held || state.remaining < held.remaining) tightest.set(bucket.unit, state);
  });
  for (const [unit, state] of tightest) setRateLimitHeaders(reply, unit, state);
  if (!decision.ok) throw refusal(request, parts, decision);
  for (const { unit, take } of buckets) {
    if (unit !== "tokens" || take.cost === 0) continue;
    (request.tokenReservations ??= []).push({
      id: take.id,
      limits: take.limits,
      reserved: take.cost,
    });
  }
}

/** The buckets of an API key's request: the key's, and its project's when the account limits it. */
function apiKeyBuckets(caller: ApiKeyCaller, parts: RateLimitParts, most: number | null): Bucket[] {
  const buckets: Bucket[] = [];
  const keyTokens = tokensPerMinuteOf(caller.rateLimit, parts.defaults);
  if (most === null) {
    const limits = caller.rateLimit ?? parts.defaults;
    buckets.push({
      unit: "requests",
      take: { id: `key:${caller.keyId}:requests`, limits, cost: 1 },
    });
  }
  if (keyTokens) buckets.push(tokenTake(`key:${caller.keyId}:tokens`, keyTokens, most ?? 0));
  const project = caller.projectRateLimit;
  if (project && caller.project !== null) {
    const id = `project:${caller.account}/${caller.project}`;
    if (most === null) {
      buckets.push({ unit: "requests", take: { id: `${id}:requests`, limits: project, cost: 1 } });
    }
    if (project.tokensPerMinute) {
      buckets.push(tokenTake(`${id}:tokens`, project.tokensPerMinute, most ?? 0));
    }
  }
  return buckets;
}

/**
 * `onRequest`, after the key is known: one request from the key's bucket
 * (its own limit from the keys file, or the default) and from its project's
 * when the account limits the project; the token balances are read, not
 * taken, so a 429 and a 200 both carry the token headers. Runs in the key
 * route's one `onRequest` hook (route-hooks.ts), right after the key.
 */
export function limitApiKeys(
  parts: RateLimitParts,
): (request: FastifyRequest, reply: FastifyReply) => Promise<void> | null {
  return (request, reply) => {
    const caller = request.caller;
    if (caller?.kind !== "api-key") return null;
    return decide(request, reply, parts, apiKeyBuckets(caller, parts, null));
  };
}

/**
 * `preHandler`, after admission, on a model route of API keys: the token
 * reservations of the key and its project; null when there is nothing to
 * reserve (no token limits), so the hook hands on without a promise.
 */
export function reserveApiKeyTokens(
  parts: RateLimitParts,
): (request: FastifyRequest, reply: FastifyReply) => Promise<void> | null {
  return (request, reply) => {
    const caller = request.caller;
    if (caller?.kind !== "api-key") return null;
    const buckets = apiKeyBuckets(caller, parts, mostTokensOf(request, parts));
    return buckets.length === 0 ? null : decide(request, reply, parts, buckets);
  };
}

/**
 * `preHandler`, after the body is judged, on the payment routes: the request
 * and token buckets of the `kid` that signed the request. Not the
 * `pay-agent-id`'s: that header is unsigned, so a bucket of its name could be
 * escaped by renaming it and emptied by anyone holding any signature (a read's
 * may be sent again within the tolerance) under another agent's name.
 */
export function limitPaySigners(parts: RateLimitParts): preHandlerAsyncHookHandler {
  return async (request, reply) => {
    const caller = request.caller;
    if (caller?.kind !== "pay") return;
    const id = `kid:${caller.signedBy.kid}`;
    const tokensPerMinute = parts.defaults.tokensPerMinute;
    await decide(request, reply, parts, [
      { unit: "requests", take: { id: `${id}:requests`, limits: parts.defaults, cost: 1 } },
      ...(tokensPerMinute && request.model
        ? [tokenTake(`${id}:tokens`, tokensPerMinute, mostTokensOf(request, parts))]
        : []),
    ]);
  };
}

/**
 * Once the answer is known (the metering `onSend` hook, route-hooks.ts):
 * settles a token reservation with what the request used (all of it given
 * back when nothing was served). Not awaited: the answer does not wait for
 * the limiter, and a failed settlement only leaves the bucket stricter than
 * it should be until it refills. A stream's usage is not known when its
 * headers leave: it keeps its reservation until it ends.
 */
export function settleTokens(
  parts: RateLimitParts,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  if (request.tokenReservations && !isEventStream(reply)) {
    settleReservations(parts, request, reply.served?.usage);
  }
}

/**
 * `onResponse`: settles a stream's reservation with the usage of its last
 * event, or all of it held when the stream ended without one (the tokens
 * it produced are not known, so the limit errs on the strict side).
 */
export function settleStreamedTokens(parts: RateLimitParts): onResponseHookHandler {
  return (request, _reply, done) => {
    if (request.tokenReservations) {
      const held = request.tokenReservations.reduce((most, r) => Math.max(most, r.reserved), 0);
      const usage = request.streamedUsage ?? { inputTokens: held, outputTokens: 0 };
      settleReservations(parts, request, usage);
    }
    done();
  };
}

function isEventStream(reply: FastifyReply): boolean {
  return String(reply.getHeader("content-type") ?? "").startsWith("text/event-stream");
}

function settleReservations(
  parts: RateLimitParts,
  request: FastifyRequest,
  usage: { inputTokens: number; outputTokens: number } | null | undefined,
): void {
  const reservations = request.tokenReservations;
  if (!reservations) return;
  // Once: an error answered in its place runs the hooks again.
  request.tokenReservations = null;
  const used = usage ? usage.inputTokens + usage.outputTokens : 0;
  for (const reservation of reservations) {
    parts.limiter
      .settle(reservation.id, reservation.limits, used - reservation.reserved)
      .catch((error: unknown) =>
        request.log.warn({ ...logFieldsOf(request), err: error }, "token reservation not settled"),
      );
  }
}
