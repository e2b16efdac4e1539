import type { RateLimits } from "./rate-limit/limits.js";
import type { CodedError } from "../lib/coded-error.js";
import type { AllowanceResult } from "./pay/provider-client.js";

/**
 * What the gateway's routes need from the components that authenticate,
 * limit, meter and pay. `main.ts` plugs the real ones in; tests may plug in
 * their own real instances with other settings. Each is one small interface.
 */

export interface ApiKeyIdentity {
  /** The key's id: safe to log, never the key itself. */
  id: string;
  account: string;
  /** The key's own rate limit, when the keys file sets one. */
  rateLimit?: RateLimits | undefined;
}

export interface ApiKeyAuth {
  /** null when the key is missing, malformed, unknown or revoked. */
  authenticate(rawKey: string | undefined): ApiKeyIdentity | null;
  mayUseProject(identity: ApiKeyIdentity, projectId: string): boolean;
}

export type RateDecision = { ok: true } | { ok: false; retryAfterSeconds: number };

export interface RateLimit {
  /** Takes one request from the identity's bucket. */
  take(identity: string, limits?: RateLimits): RateDecision;
}

export interface UsageRecord {
  request_id: string;
  account: string;
  project: string | null;
  model: string;
  input_tokens: number;
  output_tokens: number;
  time: string;
}

export interface UsageMeter {
  /** Durable before it resolves: the response is sent only after. */
  record(usage: UsageRecord): Promise<void>;
}

/** A failed check carries the error to answer with: 401 invalid, or 402 when stale. */
export type SignatureCheck = { ok: true; kid: string } | { ok: false; error: CodedError };

export interface AllowanceRequest {
  request_id: string;
  agent_id: string | null;
  service_slug: string;
  model: string;
  max_tokens: number;
}

export interface Settlement {
  request_id: string;
  agent_id: string | null;
  service_slug: string;
  model: string;
  input_tokens: number;
  output_tokens: number;
}

export interface PaymentGate {
  /** Verifies `pay-signature` over the raw body. */
  verify(header: string | undefined, rawBody: Buffer): SignatureCheck;
  checkAllowance(request: AllowanceRequest): Promise<AllowanceResult>;
  /** Durable before it resolves; delivered to the provider in the background. */
  settle(settlement: Settlement): Promise<void>;
}

export type { AllowanceResult };
