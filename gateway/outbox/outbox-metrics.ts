import { Counter, Gauge, type Registry } from "prom-client";
import type { OutboxMetrics } from "./durable-outbox.js";

export interface OutboxCollectors {
  delivered: Counter<"outbox">;
  failedAttempts: Counter<"outbox" | "retryable">;
  deadLettered: Counter<"outbox">;
  pending: Gauge<"outbox">;
}

/**
 * The outbox metrics, registered once per registry and shared by every outbox
 * on it (labelled by the outbox's name: `usage`, `settlements`, ...).
 */
export function registerOutboxCollectors(registry: Registry): OutboxCollectors {
  const existing = registry.getSingleMetric("modelgate_outbox_delivered_total");
  if (existing) {
    return {
      delivered: existing as Counter<"outbox">,
      failedAttempts: registry.getSingleMetric("modelgate_outbox_failed_attempts_total") as Counter<
        "outbox" | "retryable"
      >,
      deadLettered: registry.getSingleMetric(
        "modelgate_outbox_dead_letters_total",
      ) as Counter<"outbox">,
      pending: registry.getSingleMetric("modelgate_outbox_pending_records") as Gauge<"outbox">,
    };
  }
  const registers = [registry];
  return {
    delivered: new Counter({
      name: "modelgate_outbox_delivered_total",
      help: "Outbox records the receiver confirmed",
      labelNames: ["outbox"],
      registers,
    }),
    failedAttempts: new Counter({
      name: "modelgate_outbox_failed_attempts_total",
      help: "Outbox delivery attempts that failed, by whether they will be retried",
      labelNames: ["outbox", "retryable"],
      registers,
    }),
    deadLettered: new Counter({
      name: "modelgate_outbox_dead_letters_total",
      help: "Outbox records parked in the dead-letter file",
      labelNames: ["outbox"],
      registers,
    }),
    pending: new Gauge({
      name: "modelgate_outbox_pending_records",
      help: "Outbox records journaled and not yet delivered",
      labelNames: ["outbox"],
      registers,
    }),
  };
}

/** The hooks one outbox reports through. */
export function outboxMetrics(registry: Registry, outbox: string): OutboxMetrics {
  const c = registerOutboxCollectors(registry);
  return {
    delivered: () => c.delivered.inc({ outbox }),
    failedAttempt: (retryable) => c.failedAttempts.inc({ outbox, retryable: String(retryable) }),
    deadLettered: () => c.deadLettered.inc({ outbox }),
    pending: (count) => c.pending.set({ outbox }, count),
  };
}
