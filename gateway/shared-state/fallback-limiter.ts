import type { Logger } from "../../lib/logger.js";
import { replicaShare, type RateLimits } from "../rate-limit/limits.js";
import type { BucketTake, LimitDecision, Limiter } from "../rate-limit/limiter.js";
import type { RateLimiter } from "../rate-limit/rate-limiter.js";
import type { SharedStateMetrics } from "./shared-state-metrics.js";
import type { ValkeyConnection } from "./valkey-connection.js";

/**
 * The shared limiter with a way out: while Valkey answers, every replica
 * takes from the same buckets; while it does not (down, or slower than the
 * connection's command timeout), this replica decides from buckets of its
 * own holding its share of each limit (the limit divided by the replica
 * count), so the replicas together still admit about the limit. The
 * request is never refused or delayed because Valkey is gone.
 */
export interface FallbackLimiterOptions {
  shared: Limiter;
  local: RateLimiter;
  connection: ValkeyConnection;
  /** Replicas the limits are split across while Valkey is away. */
  replicas: number;
  metrics: SharedStateMetrics;
  logger: Logger;
  /** Called whenever this replica decides alone: the shared side forgets its leases. */
  onFallback?: () => void;
}

export class FallbackLimiter implements Limiter {
  constructor(private readonly options: FallbackLimiterOptions) {}

  async take(takes: readonly BucketTake[]): Promise<LimitDecision> {
    if (this.options.connection.available) {
      try {
        const decision = await this.options.shared.take(takes);
        this.options.connection.commandSucceeded();
        return decision;
      } catch (error) {
        this.failed(error);
      }
    }
    this.options.metrics.fallbacks.inc({ kind: "rate_limit" });
    this.options.onFallback?.();
    return this.options.local.takeAll(
      takes.map((take) => ({ ...take, limits: this.share(take.limits) })),
    );
  }

  async settle(id: string, limits: RateLimits, delta: number): Promise<void> {
    if (this.options.connection.available) {
      try {
        await this.options.shared.settle(id, limits, delta);
        this.options.connection.commandSucceeded();
        return;
      } catch (error) {
        this.failed(error);
      }
    }
    this.options.local.settle(id, this.share(limits), delta);
  }

  private share(limits: RateLimits): RateLimits {
    return replicaShare(limits, this.options.replicas);
  }

  /** A command that failed while the connection looked up: the connection reports the outage. */
  private failed(error: unknown): void {
    this.options.connection.commandFailed(error);
    this.options.logger.debug({ err: error }, "valkey rate-limit command failed; deciding locally");
  }
}
