import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../lib/logger.js";
import { KeyStore } from "./auth/key-store.js";
import { parseKeysFile } from "./auth/keys-file.js";
import type { GatewayDeps, PaymentDeps } from "./app.js";
import { readSecretFile, readSigningSecrets, type GatewayConfig } from "./config.js";
import { createHttpSinkSender, isRetryableSinkError } from "./metering/http-sink.js";
import { Meter } from "./metering/meter.js";
import { parseUsageRecord, toWireUsage, type UsageRecord } from "./metering/usage-record.js";
import { createGatewayMetrics, observeRegistry, observeUsedSignatures } from "./metrics.js";
import { DurableOutbox } from "./outbox/durable-outbox.js";
import { outboxMetrics } from "./outbox/outbox-metrics.js";
import { PaymentProviderClient } from "./pay/provider-client.js";
import {
  isRetryableSettlementError,
  parseSettlementRecord,
  settlementSender,
  type SettlementRecord,
} from "./pay/settlement.js";
import type { RateLimits } from "./rate-limit/limits.js";
import { ModelRegistry } from "./registry/registry.js";
import { createSharedState } from "./shared-state/shared-state.js";
import { Upstream } from "./upstream/forward.js";

/**
 * Builds every component the gateway needs from its configuration, and
 * closes them in reverse. `modelgate gateway` and `modelgate dev` share it;
 * the model source (files or the cluster) is attached by the caller.
 */
export interface GatewayComponents {
  deps: GatewayDeps;
  close(): Promise<void>;
}

/** Billing records are never given up on: retried until the receiver answers. */
const NEVER_GIVE_UP = { baseDelayMs: 500, maxDelayMs: 60_000 };
/** Usage records per POST to the sink, at most. */
const USAGE_BATCH_MAX = 100;
/** How long a usage record may wait for others to share its POST. */
const USAGE_LINGER_MS = 100;

export async function createGatewayComponents(
  config: GatewayConfig,
  logger: Logger,
): Promise<GatewayComponents> {
  const metrics = createGatewayMetrics();
  const closers: Array<() => Promise<void> | void> = [];

  const keys = config.keysFile
    ? await KeyStore.open({ path: config.keysFile, logger })
    : new KeyStore(parseKeysFile("keys: []\n", "(no keys file)"), { logger });
  if (!config.keysFile)
    logger.warn("no keys file (--keys-file): every API-key request is refused with 401");
  closers.push(() => keys.close());

  const usageOutbox = new DurableOutbox<UsageRecord>({
    dir: join(config.stateDir, "usage"),
    name: "usage",
    journalSync: config.journalSync,
    sendBatch: config.usageSinkUrl
      ? createHttpSinkSender({
          url: config.usageSinkUrl,
          toWire: toWireUsage,
          ...(config.usageSinkTokenFile
            ? { token: readSecretFile(config.usageSinkTokenFile) }
            : {}),
        })
      : () => Promise.reject(new Error("no usage sink configured (--usage-sink-url)")),
    // Records that arrive one by one share a POST when they are at most
    // USAGE_LINGER_MS apart: billing needs every record, not each at once.
    maxBatch: USAGE_BATCH_MAX,
    lingerMs: USAGE_LINGER_MS,
    isRetryable: isRetryableSinkError,
    retry: NEVER_GIVE_UP,
    parse: parseUsageRecord,
    metrics: outboxMetrics(metrics.registry, "usage"),
    logger,
  });
  // Without a sink the records stay journaled, to be delivered once one is set.
  if (config.usageSinkUrl) await usageOutbox.start();
  else {
    await usageOutbox.open();
    logger.warn(
      "no usage sink (--usage-sink-url): usage records are journaled and counted, not exported",
    );
  }
  closers.push(() => usageOutbox.close());

  const rateLimits: RateLimits = {
    requestsPerMinute: config.rateLimitPerMinute,
    burst: config.rateLimitBurst,
    ...(config.rateLimitTokensPerMinute
      ? { tokensPerMinute: config.rateLimitTokensPerMinute }
      : {}),
  };
  const shared = await createSharedState({
    valkeyUrl: config.valkeyUrl,
    valkeyPassword: config.valkeyPasswordFile
      ? readSecretFile(config.valkeyPasswordFile)
      : undefined,
    valkeyCa: config.valkeyCaFile ? readFileSync(config.valkeyCaFile, "utf8") : undefined,
    replicas: config.replicas,
    defaults: rateLimits,
    registry: metrics.registry,
    logger,
  });
  closers.push(() => shared.close());

  let pay: PaymentDeps | null = null;
  if (config.payProviderUrl && config.paySigningSecretsFile && config.payProviderCredentialFile) {
    const client = new PaymentProviderClient({
      baseUrl: config.payProviderUrl,
      credential: readSecretFile(config.payProviderCredentialFile),
    });
    const settlements = new DurableOutbox<SettlementRecord>({
      dir: join(config.stateDir, "settlements"),
      name: "settlements",
      journalSync: config.journalSync,
      send: settlementSender(client),
      isRetryable: isRetryableSettlementError,
      retry: NEVER_GIVE_UP,
      parse: parseSettlementRecord,
      metrics: outboxMetrics(metrics.registry, "settlements"),
      logger,
    });
    await settlements.start();
    observeUsedSignatures(metrics, shared.localSignatures);
    pay = {
      secrets: readSigningSecrets(config.paySigningSecretsFile),
      toleranceSeconds: config.payToleranceSeconds,
      usedSignatures: shared.usedSignatures,
      checkAllowance: (request) => client.checkAllowance(request),
      settlements: { settle: (record) => settlements.append(record.responseId, record) },
    };
    closers.push(() => settlements.close());
    closers.push(() => client.close());
  } else {
    logger.warn(
      "payment route not configured: every /pay/v1/responses request is refused with 401",
    );
  }

  const upstream = new Upstream();
  closers.push(() => upstream.close());

  const registry = new ModelRegistry();
  observeRegistry(metrics, registry);
  const deps: GatewayDeps = {
    registry,
    upstream,
    keys,
    limiter: shared.limiter,
    rateLimits,
    meter: new Meter({ registry: metrics.registry, outbox: usageOutbox }),
    pay,
    metrics,
    logger,
    now: Date.now,
    bodyLimit: config.bodyLimitBytes,
    requestTimeoutSeconds: config.requestTimeout,
  };
  return {
    deps,
    async close() {
      for (const close of closers.reverse()) await close();
    },
  };
}
