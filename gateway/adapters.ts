import { authorizeProject, type KeyStore } from "./auth/key-store.js";
import type { Meter } from "./metering/meter.js";
import type { DurableOutbox } from "./outbox/durable-outbox.js";
import { signatureError } from "./pay/pay-errors.js";
import type { PaymentProviderClient } from "./pay/provider-client.js";
import type { SettlementRecord } from "./pay/settlement.js";
import { verifyPaySignature } from "./pay/signature.js";
import type { ApiKeyAuth, PaymentGate, RateLimit, UsageMeter } from "./ports.js";
import type { RateLimiter } from "./rate-limit/rate-limiter.js";

/**
 * Thin adapters from the gateway's components to the small ports its
 * routes use. No decisions here: each line maps one call onto another.
 */
export function apiKeyAuth(store: KeyStore): ApiKeyAuth {
  return {
    authenticate(rawKey) {
      const result = store.authenticate(rawKey);
      return result.ok ? result.key : null;
    },
    mayUseProject(identity, projectId) {
      const key = identity as Parameters<typeof authorizeProject>[0];
      return authorizeProject(key, projectId).ok;
    },
  };
}

export function rateLimit(limiter: RateLimiter): RateLimit {
  return { take: (identity, limits) => limiter.check(identity, limits) };
}

export function usageMeter(meter: Meter): UsageMeter {
  return {
    async record(usage) {
      await meter.record({
        request_id: usage.request_id,
        account: usage.account,
        ...(usage.project !== null ? { project: usage.project } : {}),
        model: usage.model,
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        time: usage.time,
      });
    },
  };
}

export interface PaymentGateParts {
  secrets: ReadonlyMap<string, readonly string[]>;
  toleranceSeconds: number;
  client: PaymentProviderClient;
  settlements: Pick<DurableOutbox<SettlementRecord>, "append">;
  now: () => number;
}

export function paymentGate(parts: PaymentGateParts): PaymentGate {
  return {
    verify(header, rawBody) {
      const nowSeconds = Math.floor(parts.now() / 1000);
      const result = verifyPaySignature({
        header,
        rawBody,
        secrets: parts.secrets,
        nowSeconds,
        toleranceSeconds: parts.toleranceSeconds,
      });
      return result.ok
        ? { ok: true, kid: result.kid }
        : { ok: false, error: signatureError(result, nowSeconds, parts.toleranceSeconds) };
    },
    checkAllowance(request) {
      return parts.client.checkAllowance({
        requestId: request.request_id,
        agentId: request.agent_id,
        serviceSlug: request.service_slug,
        model: request.model,
        maxTokens: request.max_tokens,
      });
    },
    async settle(settlement) {
      await parts.settlements.append(settlement.request_id, {
        requestId: settlement.request_id,
        agentId: settlement.agent_id,
        serviceSlug: settlement.service_slug,
        model: settlement.model,
        inputTokens: settlement.input_tokens,
        outputTokens: settlement.output_tokens,
        createdAtMs: parts.now(),
      });
    },
  };
}
