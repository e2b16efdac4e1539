import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** The operator's Prometheus metrics, on a registry of its own (no global state). */
export interface OperatorMetrics {
  registry: Registry;
  reconciles: Counter<"result">;
  errors: Counter;
  duration: Histogram;
  queueDepth: Gauge;
  leader: Gauge;
  writes: Counter<"kind">;
}

export function createOperatorMetrics(): OperatorMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    reconciles: new Counter({
      name: "modelgate_operator_reconcile_total",
      help: "Reconciles finished, by result (success, error)",
      labelNames: ["result"],
      registers,
    }),
    errors: new Counter({
      name: "modelgate_operator_reconcile_errors_total",
      help: "Reconciles that failed and were requeued with backoff",
      registers,
    }),
    duration: new Histogram({
      name: "modelgate_operator_reconcile_duration_seconds",
      help: "Time one reconcile took",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    queueDepth: new Gauge({
      name: "modelgate_operator_queue_depth",
      help: "Models waiting in the work queue",
      registers,
    }),
    leader: new Gauge({
      name: "modelgate_operator_leader",
      help: "1 while this replica holds the leader Lease",
      registers,
    }),
    writes: new Counter({
      name: "modelgate_operator_writes_total",
      help: "Objects applied, deleted or status-written, by kind",
      labelNames: ["kind"],
      registers,
    }),
  };
}
