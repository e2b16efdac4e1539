import { readFileSync } from "node:fs";
import { join } from "node:path";
import { errorText } from "../lib/error-text.js";
import type { Logger } from "../lib/logger.js";
import { KeyStore } from "./auth/key-store.js";
import { parseKeysFile } from "./auth/keys-file.js";
import type { GatewayDeps, PaymentDeps } from "./app.js";
import { BatchWorker } from "./batch/batch-worker.js";
import { storeCalls } from "./store/store-calls.js";
import { readSecretFile, readSigningSecrets, type GatewayConfig } from "./config.js";
import { createHttpSinkSender, isRetryableSinkError } from "./metering/http-sink.js";
import { Meter } from "./metering/meter.js";
import { ledgerEntryOfSettlement, ledgerEntryOfUsage } from "./metering/to-ledger.js";
import { parseUsageRecord, type UsageRecord } from "./metering/usage-record.js";
import {
  createGatewayMetrics,
  observeExporter,
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
import { withDatabaseTls } from "./store/database-url.js";
import {
  createLedgerSender,
  isRetryableLedgerError,
  ledgerThenEach,
  type RecordedEntry,
} from "./store/ledger-sink.js";
import type { StoreState } from "./store/answer-within.js";
import { ResponseStore, sweepIntervalMs } from "./store/response-store.js";
import { StoreOpener } from "./store/store-opener.js";
import { Upstream } from "./upstream/forward.js";
import { LedgerExporter } from "./usage/ledger-exporter.js";

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
/**
 * Usage records per ledger INSERT, at most. On PGlite a row cost about 36 µs
 * of the event loop in a batch of 100 and 26 µs in one of 250, the
 * statement's own cost shared by more rows (docs/state.md); past 1,000
 * answers a second a batch of 100 filled before its linger ended.
 */
const USAGE_BATCH_MAX = 250;
/** How long a usage record may wait for others to share its batch. */
const USAGE_LINGER_MS = 100;
/**
 * On shutdown, how long the outboxes keep delivering before they close. A
 * pod deleted in a rollout takes its emptyDir along: records still lingering
 * for a batch would go with it. Well inside the chart's grace period.
 */
const SHUTDOWN_DRAIN_MS = 5_000;

/** Settlements per batch (one ledger INSERT, then one provider call each), at most. */
const SETTLEMENT_BATCH_MAX = 16;

const isRetryableSettlement = (error: unknown): boolean =>
  error instanceof SettlementError
    ? isRetryableSettlementError(error)
    : isRetryableLedgerError(error);

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
  const databaseUrl = config.databaseUrl
    ? withDatabaseTls(config.databaseUrl, {
        sslMode: config.databaseSslMode,
        caFile: config.databaseCaFile,
      })
    : undefined;
  const store = new StoreOpener(
    databaseUrl ? { url: databaseUrl } : { dataDir: join(config.stateDir, "db") },
    { logger },
  );
  store.start();
  closers.push(() => store.close());
  observeStore(metrics, store);
  // The embedded ledger has one writer and one exporter, in this process:
  // the exporter is fed the rows as they are written instead of reading
  // each back (ledger-exporter.ts, `feed`).
  const feedsExporter = !databaseUrl && Boolean(config.usageSinkUrl);
  let exporterFeed: ((recorded: readonly RecordedEntry[]) => void) | null = null;
  const toLedger = createLedgerSender(() => store.db(), {
    onWritten: () => store.markReachable(),
    ...(feedsExporter ? { onRecorded: (recorded) => exporterFeed?.(recorded) } : {}),
    // A record the database refused is no outage: only other errors say it is down.
    onFailed: (error) => {
      if (isRetryableLedgerError(error)) store.markUnreachable(error);
    },
  });

  // The usage journal is the ledger's write-ahead buffer: each batch goes to
  // the ledger, which dedupes on the response id. The HTTP sink, when set,
  // is fed from the ledger by one exporter across every replica.
  const usageOutbox = new DurableOutbox<UsageRecord>({
    dir: join(config.stateDir, "usage"),
    name: "usage",
    journalSync: config.journalSync,
    sendBatch: (items, options) =>
      toLedger(
        items.map((item) => ({ key: item.key, record: ledgerEntryOfUsage(item.record) })),
        options,
      ),
    // Records that arrive one by one share a batch when they are at most
    // USAGE_LINGER_MS apart: billing needs every record, not each at once.
    maxBatch: USAGE_BATCH_MAX,
    lingerMs: USAGE_LINGER_MS,
    isRetryable: isRetryableLedgerError,
    retry: NEVER_GIVE_UP,
    parse: parseUsageRecord,
    metrics: outboxMetrics(metrics.registry, "usage"),
    logger,
  });
  await usageOutbox.start();
  closers.push(() => usageOutbox.close());
  if (config.usageSinkUrl) {
    const exporter = new LedgerExporter({
      db: () => store.db(),
      ...(databaseUrl ? { lockUrl: databaseUrl } : {}),
      send: createHttpSinkSender({
        url: config.usageSinkUrl,
        ...(config.usageSinkTokenFile ? { token: readSecretFile(config.usageSinkTokenFile) } : {}),
      }),
      isRetryable: isRetryableSinkError,
      retry: NEVER_GIVE_UP,
      logger,
      fed: feedsExporter,
      hooks: {
        onExported: (rows) => counted.onExported(rows),
        onRefused: () => counted.onRefused(),
      },
    });
    const counted = observeExporter(metrics, exporter);
    if (feedsExporter) exporterFeed = (recorded) => exporter.feed(recorded);
    exporter.start();
    closers.push(() => exporter.close());
  } else {
    logger.info("no usage sink (--usage-sink-url): usage goes to the ledger only");
  }
  const drains: Array<() => Promise<void>> = [() => usageOutbox.whenIdle()];

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
      // Settlements that wait together share one ledger write; a lone one
      // is sent at once (no linger), as before.
      sendBatch: ledgerThenEach(toLedger, ledgerEntryOfSettlement, settle, isRetryableSettlement),
      maxBatch: SETTLEMENT_BATCH_MAX,
      isRetryable: isRetryableSettlement,
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
    drains.push(() => settlements.whenIdle());
  } else {
    logger.warn(
      "payment route not configured: every /pay/v1/responses request is refused with 401",
    );
  }

  // While the database is down the gateway serves without it: stored
  // responses, Files and Batches refuse at once rather than wait, and the
  // store checks in the background whether it is back (opening it if it
  // never opened).
  const storeState: StoreState = {
    down: () => {
      if (!store.down) return false;
      store.recheck();
      return true;
    },
    unreachable: (error) => store.markUnreachable(error),
  };
  // Stored responses share the store; each replica sweeps the expired ones.
  const responses = new ResponseStore({
    db: () => store.db(),
    retentionSeconds: config.responseRetentionSeconds,
    now: Date.now,
    ...storeState,
  });
  responses.startSweeping(sweepIntervalMs(config.responseRetentionSeconds), (error) =>
    logger.warn({ err: errorText(error) }, "stored responses not swept; retried later"),
  );
  closers.push(() => responses.stopSweeping());

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
    responses,
    metrics,
    logger,
    now: Date.now,
    bodyLimit: config.bodyLimitBytes,
    requestTimeoutSeconds: config.requestTimeout,
    uploadTimeoutSeconds: config.uploadTimeout,
    store: storeCalls({ db: () => store.db(), ...storeState }),
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
      pacedSpacingMs: config.batchPacedSpacingMs,
      bodyLimitBytes: config.bodyLimitBytes,
    });
    worker.start();
    // Before the upstream closes: the worker hands its leases back first.
    closers.push(() => worker.stop());
  }
  return {
    deps,
    store,
    async close() {
      // Both outboxes deliver what waits, together, before anything closes.
      await Promise.race([
        Promise.all(drains.map((drain) => drain())),
        new Promise((resolve) => setTimeout(resolve, SHUTDOWN_DRAIN_MS).unref()),
      ]);
      for (const close of closers.reverse()) await close();
    },
  };
}
