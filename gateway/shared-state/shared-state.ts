import type { Registry } from "prom-client";
import type { Logger } from "../../lib/logger.js";
import { InProcessUsedSignatures, type UsedSignatures } from "../pay/used-signatures.js";
import type { RateLimits } from "../rate-limit/limits.js";
import type { Limiter } from "../rate-limit/limiter.js";
import { InProcessLimiter, RateLimiter } from "../rate-limit/rate-limiter.js";
import { FallbackLimiter } from "./fallback-limiter.js";
import { FallbackUsedSignatures } from "./fallback-used-signatures.js";
import { LeasedLimiter } from "./leased-limiter.js";
import { observeLeasedUnits, sharedStateMetrics } from "./shared-state-metrics.js";
import { ValkeyConnection } from "./valkey-connection.js";
import { ValkeyLimiter } from "./valkey-limiter.js";
import { ValkeyUsedSignatures } from "./valkey-used-signatures.js";

/**
 * The state replicas share: rate-limit buckets and the memory of used
 * payment signatures. With a Valkey URL, Valkey holds them and this
 * process's memory stands in while it is unreachable; without one, this
 * process's memory holds them (one replica).
 */
export interface SharedState {
  limiter: Limiter;
  usedSignatures: UsedSignatures;
  /** This replica's own memory of signatures: gauged, and the fallback's. */
  localSignatures: InProcessUsedSignatures;
  /** Null without Valkey. */
  connection: ValkeyConnection | null;
  close(): Promise<void>;
}

export interface SharedStateOptions {
  valkeyUrl?: string | undefined;
  valkeyPassword?: string | undefined;
  /** PEM CA certificates for `rediss://`. */
  valkeyCa?: string | undefined;
  replicas: number;
  /** Limits of callers without their own (the in-process buckets' defaults). */
  defaults: RateLimits;
  registry: Registry;
  logger: Logger;
}

export async function createSharedState(options: SharedStateOptions): Promise<SharedState> {
  const local = new RateLimiter({ defaults: options.defaults });
  const localSignatures = new InProcessUsedSignatures();
  if (!options.valkeyUrl) {
    return {
      limiter: new InProcessLimiter(local),
      usedSignatures: localSignatures,
      localSignatures,
      connection: null,
      close: () => Promise.resolve(),
    };
  }
  const metrics = sharedStateMetrics(options.registry);
  const connection = new ValkeyConnection({
    url: options.valkeyUrl,
    password: options.valkeyPassword,
    ca: options.valkeyCa,
    logger: options.logger,
    metrics,
  });
  await connection.connect();
  const parts = { connection, metrics, logger: options.logger };
  const leased = new LeasedLimiter({
    shared: new ValkeyLimiter(connection.client),
    replicas: options.replicas,
    decisions: metrics.limitDecisions,
  });
  observeLeasedUnits(options.registry, leased);
  return {
    limiter: new FallbackLimiter({
      ...parts,
      shared: leased,
      local,
      replicas: options.replicas,
      onFallback: () => leased.drop(),
    }),
    usedSignatures: new FallbackUsedSignatures({
      ...parts,
      shared: new ValkeyUsedSignatures(connection.client),
      local: localSignatures,
    }),
    localSignatures,
    connection,
    async close() {
      // Requests have drained: the leases go back before the connection closes.
      if (connection.available) await leased.close();
      else leased.drop();
      await connection.close();
    },
  };
}
