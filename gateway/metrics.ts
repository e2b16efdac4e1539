import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { ModelRegistry } from "./registry/registry.js";

/** The gateway's Prometheus metrics, on a registry of its own (no global state). */
export interface GatewayMetrics {
  registry: Registry;
  requests: Counter<"route" | "status_code" | "model">;
  duration: Histogram<"route">;
  upstreamDuration: Histogram<"model">;
  allowanceFailOpen: Counter<"reason">;
  rateLimited: Counter<"route">;
  /**
   * Payment route tokens by model. Not by agent: `pay-agent-id` is chosen by
   * the caller, and a label value per caller would grow without bound.
   */
  payTokens: Counter<"model" | "direction">;
  /** Payment-route requests refused because their signature was used before. */
  payReplays: Counter;
  /** InferenceModels the cluster source skips because they fail the schema. */
  registryRejected: Gauge;
}

export function createGatewayMetrics(): GatewayMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    requests: new Counter({
      name: "modelgate_gateway_requests_total",
      help: "Responses requests answered, by route, status and model",
      labelNames: ["route", "status_code", "model"],
      registers,
    }),
    duration: new Histogram({
      name: "modelgate_gateway_request_duration_seconds",
      help: "Time from a request's arrival to its answer",
      labelNames: ["route"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    upstreamDuration: new Histogram({
      name: "modelgate_gateway_upstream_duration_seconds",
      help: "Time a runtime took to answer",
      labelNames: ["model"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    allowanceFailOpen: new Counter({
      name: "modelgate_gateway_pay_allowance_fail_open_total",
      help: "Payment-route requests let through because the provider could not answer",
      labelNames: ["reason"],
      registers,
    }),
    payTokens: new Counter({
      name: "modelgate_gateway_pay_tokens_total",
      help: "Tokens settled on the payment route, by model and direction",
      labelNames: ["model", "direction"],
      registers,
    }),
    payReplays: new Counter({
      name: "modelgate_gateway_pay_replays_total",
      help: "Payment-route requests refused (401) because their pay-signature was already used",
      registers,
    }),
    rateLimited: new Counter({
      name: "modelgate_gateway_rate_limited_total",
      help: "Requests refused by a rate limit",
      labelNames: ["route"],
      registers,
    }),
    registryRejected: new Gauge({
      name: "modelgate_gateway_registry_rejected_models",
      help: "InferenceModels skipped because they fail the schema (logged by namespace/name and field)",
      registers,
    }),
  };
}

/** The memory of used payment signatures: how full, and how often it forgot one early. */
export function observeUsedSignatures(
  metrics: GatewayMetrics,
  memory: { readonly size: number; readonly evictedUnexpired: number },
): void {
  const registers = [metrics.registry];
  new Gauge({
    name: "modelgate_gateway_pay_used_signatures",
    help: "Payment signatures remembered as used (until their timestamp is out of tolerance)",
    registers,
    collect() {
      this.set(memory.size);
    },
  });
  new Gauge({
    name: "modelgate_gateway_pay_used_signatures_evicted",
    help: "Used signatures forgotten for room before they expired (each could be replayed once)",
    registers,
    collect() {
      this.set(memory.evictedUnexpired);
    },
  });
}

/** Whether the ledger's database answered the last time the gateway tried it. */
export function observeStore(
  metrics: GatewayMetrics,
  store: { readonly reachable: boolean },
): void {
  new Gauge({
    name: "modelgate_gateway_store_up",
    help: "1 when the ledger database answered the gateway's last open or write, else 0 (records wait in the journals; see modelgate_outbox_pending_records)",
    registers: [metrics.registry],
    collect() {
      this.set(store.reachable ? 1 : 0);
    },
  });
}

/**
 * The usage exporter (gateway/usage/ledger-exporter.ts): whether this
 * replica is the one exporting, and the rows it sent or passed over. The
 * returned hooks are the exporter's.
 */
export function observeExporter(
  metrics: GatewayMetrics,
  exporter: { readonly leading: boolean },
): { onExported(rows: readonly unknown[]): void; onRefused(): void } {
  const registers = [metrics.registry];
  new Gauge({
    name: "modelgate_usage_exporter_leading",
    help: "1 on the replica that holds the export lock and sends the ledger to the usage sink, else 0",
    registers,
    collect() {
      this.set(exporter.leading ? 1 : 0);
    },
  });
  const exported = new Counter({
    name: "modelgate_usage_exported_records_total",
    help: "Ledger rows this replica sent to the usage sink and the sink accepted",
    registers,
  });
  const refused = new Counter({
    name: "modelgate_usage_export_refused_records_total",
    help: "Ledger rows the usage sink refused for good, logged and passed over",
    registers,
  });
  return {
    onExported: (rows) => exported.inc(rows.length),
    onRefused: () => refused.inc(),
  };
}

/**
 * Gauges of what the registry can route, read from it at scrape time so
 * they are never stale and cost nothing between scrapes.
 */
export function observeRegistry(metrics: GatewayMetrics, models: ModelRegistry): void {
  const registers = [metrics.registry];
  new Gauge({
    name: "modelgate_gateway_routable_models",
    help: "Models with at least one ready endpoint",
    registers,
    collect() {
      this.set(models.list().filter((m) => m.endpoints.length > 0).length);
    },
  });
  new Gauge({
    name: "modelgate_gateway_model_ready_endpoints",
    help: "Ready runtime endpoints of each model the registry knows",
    labelNames: ["model"],
    registers,
    collect() {
      // Reset first: a removed model's series must disappear, not stay at its last value.
      this.reset();
      for (const m of models.list()) this.set({ model: m.id }, m.endpoints.length);
    },
  });
}
