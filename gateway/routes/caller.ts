import type { Usage } from "../../api/runtime-wire.js";
import type { SignedBy } from "../pay/settlement.js";
import type { RateLimits } from "../rate-limit/limits.js";
import type { RoutableModel } from "../registry/registry.js";

/**
 * What the hooks learn about a request as it moves through them, on the
 * request and reply objects (decorated once, so every request has the same
 * shape): who called, which model serves it, and what it used.
 */
export interface ApiKeyCaller {
  readonly kind: "api-key";
  /** The key's id: safe to log, never the key itself. */
  readonly keyId: string;
  readonly account: string;
  /** The `x-project-id` the request is scoped to; null when it named none. */
  readonly project: string | null;
  /** An admin key (keys file `role: admin`): reads every account's usage. */
  readonly admin: boolean;
  /** The key's own rate limit, when the keys file sets one. */
  readonly rateLimit: RateLimits | undefined;
  /** The limit of the project the request is scoped to, when the account sets one. */
  readonly projectRateLimit: RateLimits | undefined;
}

export interface PayCaller {
  readonly kind: "pay";
  /** `pay-agent-id` when it is fit to log; unsigned, so it decides no charge. */
  readonly agentId: string | null;
  /** `pay-request-id` when it is fit to log. */
  readonly payRequestId: string | null;
  /** What the provider signed: the settlement carries it. */
  readonly signedBy: SignedBy;
}

export type Caller = ApiKeyCaller | PayCaller;

/** A request a runtime served: what metering bills. */
export interface Served {
  readonly model: RoutableModel;
  readonly usage: Usage;
}

declare module "fastify" {
  interface FastifyRequest {
    caller: Caller | null;
    /** The model the body names, once the body is admitted. */
    model: RoutableModel | null;
  }
  interface FastifyReply {
    served: Served | null;
  }
}
