import type { InferenceModelStatus } from "../../crds/inference-model.js";
import type { ModelStatus } from "../status.js";
import type { ModelEvent } from "./cluster-writer.js";

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
