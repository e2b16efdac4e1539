import type { FastifyRequest, onRequestHookHandler, preHandlerHookHandler } from "fastify";
import type { CodedError } from "../../lib/coded-error.js";
import { GatewayErrors } from "../errors.js";
import type { GatewayMetrics } from "../metrics.js";
import type { RateLimiter } from "../rate-limit/rate-limiter.js";
import { routeConfigOf } from "../routes/route-config.js";

/**
 * Token buckets per caller (429 with `Retry-After`). Where the check runs
 * follows the spec's order of answers: an API key's bucket right after the
 * key is known (401 → 403 → 429 → 400), a buying agent's only once the body
 * has been judged (401 → 400 → 429 → 402), so a malformed paid request is a
 * 400 whatever the agent's balance.
 */
function refusal(
  metrics: GatewayMetrics,
  request: FastifyRequest,
  retryAfterSeconds: number,
): CodedError {
  metrics.rateLimited.inc({ route: routeConfigOf(request).metricsName ?? "" });
  return GatewayErrors.rateLimited(retryAfterSeconds);
}

/** `onRequest`, after the key is known: its own limit from the keys file, or the default. */
export function limitApiKeys(limiter: RateLimiter, metrics: GatewayMetrics): onRequestHookHandler {
  return (request, _reply, done) => {
    const caller = request.caller;
    if (routeConfigOf(request).rateLimit !== "api-key" || caller?.kind !== "api-key") {
      return done();
    }
    const decision = limiter.take(`key:${caller.keyId}`, caller.rateLimit);
    done(decision.ok ? undefined : refusal(metrics, request, decision.retryAfterSeconds));
  };
}

/** `preHandler`, after the body is judged: the buying agent's bucket. */
export function limitPayAgents(
  limiter: RateLimiter,
  metrics: GatewayMetrics,
): preHandlerHookHandler {
  return (request, _reply, done) => {
    const caller = request.caller;
    if (routeConfigOf(request).rateLimit !== "pay-agent" || caller?.kind !== "pay") return done();
    const decision = limiter.take(`agent:${caller.agentKey}`);
    done(decision.ok ? undefined : refusal(metrics, request, decision.retryAfterSeconds));
  };
}
