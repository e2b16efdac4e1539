import type { InferenceModelStatus } from "../../crds/inference-model.js";
import type { ModelStatus } from "../status.js";
import type { ModelEvent } from "./cluster-writer.js";
import type { WritePlan } from "./plan-writes.js";

/**
 * One event per kind of change a reconcile made: "created Service x,
 * Deployment x-runtime" rather than one per object, so the list stays short
 * and a burst of new models costs fewer API writes. A child's name held by an
 * object another owner controls is a Warning: nothing is written over it.
 */
export function eventsForWrites(plan: WritePlan): ModelEvent[] {
  const created = plan.apply.filter((w) => !w.current).map((w) => describe(w.obj));
  const updated = plan.apply.filter((w) => w.current).map((w) => describe(w.obj));
  const deleted = plan.remove.map((ref) => `${ref.kind} ${ref.name}`);
  const events: ModelEvent[] = [];
  if (created.length > 0) {
    events.push({
      type: "Normal",
      reason: "Created",
      action: "Create",
      note: `created ${created.join(", ")}`,
    });
  }
  if (updated.length > 0) {
    events.push({
      type: "Normal",
      reason: "Updated",
      action: "Update",
      note: `updated ${updated.join(", ")}`,
    });
  }
  if (deleted.length > 0) {
    events.push({
      type: "Normal",
      reason: "Deleted",
      action: "Delete",
      note: `deleted ${deleted.join(", ")}, no longer asked for`,
    });
  }
  if (plan.notOwned.length > 0) {
    events.push({
      type: "Warning",
      reason: "NotOwned",
      action: "Reconcile",
      note: `left alone ${plan.notOwned.map(describe).join(", ")}: another owner controls it; the child is made once it is gone`,
    });
  }
  return events;
}

function describe(obj: { kind?: string; metadata?: { name?: string } }): string {
  return `${obj.kind ?? "?"} ${obj.metadata?.name ?? "?"}`;
}

/**
 * The events a status change is worth, for `kubectl describe im NAME`: the
 * model became ready or stopped being ready, or something went wrong (a new
 * Degraded reason or message). Pure, and only on transitions, so a model
 * that stays broken does not fill the event list on every reconcile.
 */
export function eventsForTransition(
  before: InferenceModelStatus | undefined,
  after: ModelStatus,
): ModelEvent[] {
  const events: ModelEvent[] = [];
  const was = (type: string) => before?.conditions?.find((c) => c.type === type);
  const now = (type: string) => after.conditions.find((c) => c.type === type);

  const degraded = now("Degraded");
  const degradedBefore = was("Degraded");
  if (
    degraded?.status === "True" &&
    (degradedBefore?.status !== "True" ||
      degradedBefore.reason !== degraded.reason ||
      degradedBefore.message !== degraded.message)
  ) {
    events.push({
      type: "Warning",
      reason: degraded.reason,
      action: "Reconcile",
      note: degraded.message,
    });
  }

  const ready = now("Ready");
  const readyBefore = was("Ready");
  if (ready?.status === "True" && readyBefore?.status !== "True") {
    events.push({ type: "Normal", reason: "Ready", action: "Reconcile", note: ready.message });
  } else if (ready?.status !== "True" && readyBefore?.status === "True") {
    events.push({
      type: "Warning",
      reason: "NotReady",
      action: "Reconcile",
      note: ready?.message ?? "no replica is ready",
    });
  }
  return events;
}
