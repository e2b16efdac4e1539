import type {
  FastifyReply,
  FastifyRequest,
  onRequestAsyncHookHandler,
  onSendAsyncHookHandler,
  preHandlerAsyncHookHandler,
} from "fastify";
import type { CodedError } from "../../lib/coded-error.js";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import { GatewayErrors } from "../errors.js";
import type { GatewayMetrics } from "../metrics.js";
import { tokenBucketLimits, type RateLimits } from "../rate-limit/limits.js";
import type { BucketTake, LimitDecision, Limiter } from "../rate-limit/limiter.js";
import { setRateLimitHeaders } from "../rate-limit/rate-limit-headers.js";
import { routeConfigOf } from "../routes/route-config.js";
import { mostTokens } from "./payment-gate.js";

/**
 * Rate limits per caller, in requests and (when configured) tokens a
 * minute, from whichever limiter the gateway runs (this process's buckets,
 * or Valkey's shared by every replica). Where each check runs follows the
 * spec's order of answers: an API key's requests right after the key is
 * known (401 → 403 → 429 → 400), its tokens once the body is admitted (the
 * reservation needs the model and `max_output_tokens`); a buying agent's
 * both at once, after the body is judged (401 → 400 → 429 → 402). A token
 * reservation is settled with the real count as the answer leaves.
 */
export interface RateLimitParts {
  limiter: Limiter;
  /** Limits of a caller without its own (an agent, or a key without `rateLimit`). */
  defaults: RateLimits;
  metrics: GatewayMetrics;
}

/** Tokens reserved for a request, to settle once its usage is known. */
interface TokenReservation {
  id: string;
  limits: RateLimits;
  reserved: number;
}

declare module "fastify" {
  interface FastifyRequest {
    tokenReservation: TokenReservation | null;
  }
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

/** The most tokens the admitted request can use, capped at the bucket (a bigger one waits for a full bucket, then owes the rest). */
function reservationOf(request: FastifyRequest, capacity: number): number {
  const body = request.body as {
    input: string;
    instructions?: string;
    max_output_tokens?: number | null;
  };
  const most = mostTokens(
    body.input,
    body.instructions,
    body.max_output_tokens,
    request.model?.maxTokens,
  );
  return Math.min(most, capacity);
}

/**
 * Takes the buckets (requests first, then tokens, either may be absent),
 * sets the headers of what was taken, and refuses with 429 when they lack
 * room. Records the token reservation to settle.
 */
async function decide(
  request: FastifyRequest,
  reply: FastifyReply,
  parts: RateLimitParts,
  requests: BucketTake | null,
  tokens: BucketTake | null,
): Promise<void> {
  const takes = [requests, tokens].filter((take): take is BucketTake => take !== null);
  const decision = await parts.limiter.take(takes);
  let i = 0;
  if (requests) setRateLimitHeaders(reply, "requests", decision.states[i++]!);
  if (tokens) setRateLimitHeaders(reply, "tokens", decision.states[i]!);
  if (!decision.ok) throw refusal(request, parts, decision);
  if (tokens && tokens.cost > 0) {
    request.tokenReservation = { id: tokens.id, limits: tokens.limits, reserved: tokens.cost };
  }
}

/**
 * `onRequest`, after the key is known: one request from the key's bucket
 * (its own limit from the keys file, or the default); its token balance is
 * read, not taken, so a 429 and a 200 both carry the token headers.
 */
export function limitApiKeys(parts: RateLimitParts): onRequestAsyncHookHandler {
  return async (request, reply) => {
    const caller = request.caller;
    if (routeConfigOf(request).rateLimit !== "api-key" || caller?.kind !== "api-key") return;
    const tokensPerMinute = tokensPerMinuteOf(caller.rateLimit, parts.defaults);
    await decide(
      request,
      reply,
      parts,
      { id: `key:${caller.keyId}:requests`, limits: caller.rateLimit ?? parts.defaults, cost: 1 },
      tokensPerMinute
        ? { id: `key:${caller.keyId}:tokens`, limits: tokenBucketLimits(tokensPerMinute), cost: 0 }
        : null,
    );
  };
}

/** `preHandler`, after admission: the key's token reservation, when it has a token limit. */
export function reserveApiKeyTokens(parts: RateLimitParts): preHandlerAsyncHookHandler {
  return async (request, reply) => {
    const caller = request.caller;
    if (routeConfigOf(request).rateLimit !== "api-key" || caller?.kind !== "api-key") return;
    const tokensPerMinute = tokensPerMinuteOf(caller.rateLimit, parts.defaults);
    if (!tokensPerMinute) return;
    const limits = tokenBucketLimits(tokensPerMinute);
    const cost = reservationOf(request, limits.burst);
    await decide(request, reply, parts, null, { id: `key:${caller.keyId}:tokens`, limits, cost });
  };
}

/** `preHandler`, after the body is judged: the buying agent's request and token buckets together. */
export function limitPayAgents(parts: RateLimitParts): preHandlerAsyncHookHandler {
  return async (request, reply) => {
    const caller = request.caller;
    if (routeConfigOf(request).rateLimit !== "pay-agent" || caller?.kind !== "pay") return;
    const tokensPerMinute = parts.defaults.tokensPerMinute;
    const tokenLimits = tokensPerMinute ? tokenBucketLimits(tokensPerMinute) : null;
    await decide(
      request,
      reply,
      parts,
      { id: `agent:${caller.agentKey}:requests`, limits: parts.defaults, cost: 1 },
      tokenLimits
        ? {
            id: `agent:${caller.agentKey}:tokens`,
            limits: tokenLimits,
            cost: reservationOf(request, tokenLimits.burst),
          }
        : null,
    );
  };
}

/**
 * `onSend`: settles a token reservation with what the request used (all of
 * it given back when nothing was served). Not awaited: the answer does not
 * wait for the limiter, and a failed settlement only leaves the bucket
 * stricter than it should be until it refills.
 */
export function settleTokens(parts: RateLimitParts): onSendAsyncHookHandler {
  return (request, reply) => {
    const reservation = request.tokenReservation;
    if (!reservation) return Promise.resolve();
    // Once: an error answered in its place runs this hook again.
    request.tokenReservation = null;
    const usage = reply.served?.usage;
    const used = usage ? usage.inputTokens + usage.outputTokens : 0;
    parts.limiter
      .settle(reservation.id, reservation.limits, used - reservation.reserved)
      .catch((error: unknown) =>
        request.log.warn({ ...logFieldsOf(request), err: error }, "token reservation not settled"),
      );
    return Promise.resolve();
  };
}
