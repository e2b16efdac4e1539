import { Counter, Gauge, type Registry } from "prom-client";

/** Whether the shared counters are shared right now, and how often this replica decided alone. */
export interface SharedStateMetrics {
  /** 1 while the Valkey connection is ready, 0 while the fallback serves. */
  valkeyUp: Gauge;
  /** Decisions taken from this replica's memory because Valkey could not answer. */
  fallbacks: Counter<"kind">;
  /** Rate-limit decisions taken from this replica's leased units, and those sent to Valkey. */
  limitDecisions: Counter<"decided">;
}

export function sharedStateMetrics(registry: Registry): SharedStateMetrics {
  const registers = [registry];
  return {
    valkeyUp: new Gauge({
      name: "modelgate_gateway_valkey_up",
      help: "1 while Valkey answers (rate limits and used signatures shared by every replica), 0 while this replica decides alone",
      registers,
    }),
    fallbacks: new Counter({
      name: "modelgate_gateway_valkey_fallbacks_total",
      help: "Rate-limit checks and signature claims decided from this replica's memory because Valkey could not answer",
      labelNames: ["kind"],
      registers,
    }),
    limitDecisions: new Counter({
      name: "modelgate_gateway_rate_limit_decisions_total",
      help: "Rate-limit decisions while Valkey answers: decided=leased from units this replica took ahead (no round trip), decided=shared by a call to Valkey",
      labelNames: ["decided"],
      registers,
    }),
  };
}

/** The gauge of units held in leases, read from `source` when scraped: the request path keeps no gauge up to date. */
export function observeLeasedUnits(
  registry: Registry,
  source: { readonly heldUnits: number },
): void {
  new Gauge({
    name: "modelgate_gateway_rate_limit_leased_units",
    help: "Rate-limit units this replica took from Valkey ahead and has not spent (summed over buckets; at most 5% of each bucket across the replicas)",
    registers: [registry],
    collect() {
      this.set(source.heldUnits);
    },
  });
}
