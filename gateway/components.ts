import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../lib/logger.js";
import { KeyStore } from "./auth/key-store.js";
import { parseKeysFile } from "./auth/keys-file.js";
import type { GatewayDeps, PaymentDeps } from "./app.js";
import { BatchWorker } from "./batch/batch-worker.js";
import { readSecretFile, readSigningSecrets, type GatewayConfig } from "./config.js";
import { createHttpSinkSender, SinkError } from "./metering/http-sink.js";
import { Meter } from "./metering/meter.js";
import { ledgerEntryOfSettlement, ledgerEntryOfUsage } from "./metering/to-ledger.js";
import { parseUsageRecord, toWireUsage, type UsageRecord } from "./metering/usage-record.js";
import {
  createGatewayMetrics,
  observeRegistry,
  observeStore,
  observeUsedSignatures,
} from "./metrics.js";
import { DurableOutbox } from "./outbox/durable-outbox.js";
import { outboxMetrics } from "./outbox/outbox-metrics.js";
import { PaymentProviderClient, SettlementError } from "./pay/provider-client.js";
import {
  isRetryableSettlementError,
  parseSettlementRecord,
  settlementSender,
  type SettlementRecord,
} from "./pay/settlement.js";
import type { RateLimits } from "./rate-limit/limits.js";
import { ModelRegistry } from "./registry/registry.js";
import { createSharedState } from "./shared-state/shared-state.js";
import { createLedgerSender, isRetryableLedgerError } from "./store/ledger-sink.js";
import { StoreOpener } from "./store/store-opener.js";
import { Upstream } from "./upstream/forward.js";

/**
 * Builds every component the gateway needs from its configuration, and
 * closes them in reverse. `modelgate gateway` and `modelgate dev` share it;
 * the model source (files or the cluster) is attached by the caller.
 */
export interface GatewayComponents {
  deps: GatewayDeps;
  /** The system of record (the usage ledger), opened in the background. */
  store: StoreOpener;
  close(): Promise<void>;
}

/** Billing records are never given up on: retried until the receiver answers. */
const NEVER_GIVE_UP = { baseDelayMs: 500, maxDelayMs: 60_000 };
/** Usage records per batch (one ledger INSERT, one POST to the sink), at most. */
const USAGE_BATCH_MAX = 100;
/** How long a usage record may wait for others to share its batch. */
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

  // The ledger: PostgreSQL when a URL is given, else PGlite in the state
  // folder. Opened in the background: the gateway serves while the database
  // is down, and usage waits in the journals until it is back.
  const store = new StoreOpener(
    config.databaseUrl ? { url: config.databaseUrl } : { dataDir: join(config.stateDir, "db") },
    { logger },
  );
  store.start();
  closers.push(() => store.close());
  observeStore(metrics, store);
  const toLedger = createLedgerSender(() => store.db(), {
    onWritten: () => (store.reachable = true),
    // A record the database refused is no outage: only other errors say it is down.
    onFailed: (error) => {
      if (isRetryableLedgerError(error)) store.reachable = false;
    },
  });

  // The usage journal is the ledger's write-ahead buffer: each batch goes to
  // the ledger, then to the HTTP sink when one is set. Both dedupe on the
  // response id, so a batch retried because either failed counts once.
  const exportUsage = config.usageSinkUrl
    ? createHttpSinkSender({
        url: config.usageSinkUrl,
        toWire: toWireUsage,
        ...(config.usageSinkTokenFile ? { token: readSecretFile(config.usageSinkTokenFile) } : {}),
      })
    : undefined;
  const usageOutbox = new DurableOutbox<UsageRecord>({
    dir: join(config.stateDir, "usage"),
    name: "usage",
    journalSync: config.journalSync,
    sendBatch: async (items, options) => {
      await toLedger(
        items.map((item) => ({ key: item.key, record: ledgerEntryOfUsage(item.record) })),
        options,
      );
      await exportUsage?.(items, options);
    },
    // Records that arrive one by one share a batch when they are at most
    // USAGE_LINGER_MS apart: billing needs every record, not each at once.
    maxBatch: USAGE_BATCH_MAX,
    lingerMs: USAGE_LINGER_MS,
    isRetryable: (error) =>
      error instanceof SinkError ? error.retryable : isRetryableLedgerError(error),
    retry: NEVER_GIVE_UP,
    parse: parseUsageRecord,
    metrics: outboxMetrics(metrics.registry, "usage"),
    logger,
  });
  await usageOutbox.start();
  if (!config.usageSinkUrl) {
    logger.info("no usage sink (--usage-sink-url): usage goes to the ledger only");
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
    const settle = settlementSender(client);
    const settlements = new DurableOutbox<SettlementRecord>({
      dir: join(config.stateDir, "settlements"),
      name: "settlements",
      journalSync: config.journalSync,
      // The ledger first, then the provider: a settlement the provider
      // refuses for good is still a request that was answered, and a
      // settlement retried after the provider failed lands in the ledger once.
      send: async (record, key, options) => {
        await toLedger([{ key, record: ledgerEntryOfSettlement(record) }], options);
        await settle(record, key, options);
      },
      isRetryable: (error) =>
        error instanceof SettlementError
          ? isRetryableSettlementError(error)
          : isRetryableLedgerError(error),
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
    store: () => store.db(),
    batchWindowSeconds: config.batchCompletionWindow,
  };
  // Batch work runs in every replica (docs/batch.md): leases in the store share it out.
  if (config.batchWorkers > 0) {
    const worker = new BatchWorker({
      store: () => store.db(),
      registry,
      upstream,
      logger,
      concurrency: config.batchWorkers,
      leaseMs: config.batchLeaseSeconds * 1000,
      pollMs: config.batchPollMs,
    });
    worker.start();
    // Before the upstream closes: the worker hands its leases back first.
    closers.push(() => worker.stop());
  }
  return {
    deps,
    store,
    async close() {
      for (const close of closers.reverse()) await close();
    },
  };
}
