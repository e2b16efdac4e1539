import type { KubernetesObject } from "@kubernetes/client-node";
import { inferenceModelSchema, type InferenceModel } from "../../crds/inference-model.js";
import { readyAddresses, serviceNameOf } from "../../lib/kube/endpoint-slices.js";
import type { Logger } from "../../lib/logger.js";
import type { BuildContext } from "../children/deployment.js";
import { LABEL_MODEL } from "../children/labels.js";
import { childNames } from "../children/names.js";
import { isControlledBy } from "../children/owner.js";
import { canonicalJson } from "../children/spec-hash.js";
import {
  computeStatus,
  observeDeployment,
  validateSpecSemantics,
  type Observed,
} from "../status.js";
import type { Caches } from "./caches.js";
import type { ModelEvent, Writer } from "./cluster-writer.js";
import { desiredChildren } from "./desired.js";
import type { EventSink } from "./event-sink.js";
import { eventsForTransition, eventsForWrites } from "./events.js";
import { planWrites } from "./plan-writes.js";

/**
 * One pass of the level-triggered loop for one model: read the model and its
 * children from the caches, apply what differs from the desired objects,
 * delete what must not exist, then write the status the observed children
 * imply. It never looks at the event that caused it, so running it twice,
 * or after a missed event, converges to the same cluster.
 */
export interface ReconcilerDeps {
  caches: Caches;
  writer: Writer;
  events: EventSink;
  build: BuildContext;
  logger: Logger;
  now?: () => string;
}

export interface ReconcileResult {
  /** Children created, changed or deleted in this pass. */
  changed: number;
  statusWritten: boolean;
}

export function createReconciler(deps: ReconcilerDeps) {
  const now = deps.now ?? (() => new Date().toISOString());

  return async function reconcile(key: string): Promise<ReconcileResult> {
    const slash = key.indexOf("/");
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const raw = deps.caches.models.get(name, namespace);
    // Gone or going: the garbage collector removes the children through
    // their owner references; there is nothing to write.
    if (!raw || raw.metadata?.deletionTimestamp) return { changed: 0, statusWritten: false };

    const parsed = inferenceModelSchema.safeParse(raw);
    if (!parsed.success) {
      // The CRD's schema rejects such objects; one stored under an older
      // CRD version is reported and left alone rather than crash-looping.
      const issue = parsed.error.issues[0]!;
      deps.logger.error(
        { model: key, field: issue.path.join("."), reason: issue.message },
        "InferenceModel does not match the schema; skipped",
      );
      return { changed: 0, statusWritten: false };
    }
    const model = parsed.data;

    let changed = 0;
    // What the API server answered to this pass's apply of the Deployment:
    // newer than the cache, so the status written below already describes it
    // instead of a "creating" status that the next event would overwrite.
    let applied: KubernetesObject | undefined;
    if (validateSpecSemantics(model) === null) {
      const plan = planWrites(model, desiredChildren(model, deps.build), deps.caches);
      // The writes are independent objects: send them together, one round
      // trip for the reconcile instead of one per child.
      const results = await Promise.all(plan.apply.map(({ obj }) => deps.writer.apply(obj)));
      await Promise.all(plan.remove.map((ref) => deps.writer.remove(ref)));
      applied = results.find((obj) => obj.kind === "Deployment");
      changed = plan.apply.length + plan.remove.length;
      for (const event of eventsForWrites(plan)) emit(model, event);
    }

    const status = computeStatus(model, observe(model, deps.caches, applied), now());
    const before = model.status;
    if (before !== undefined && canonicalJson(before) === canonicalJson(status)) {
      return { changed, statusWritten: false };
    }
    await deps.writer.writeStatus(model, status);
    for (const event of eventsForTransition(before, status)) emit(model, event);
    return { changed, statusWritten: true };
  };

  function emit(model: InferenceModel, event: ModelEvent): void {
    deps.events.record(model, event);
  }
}

/** What the status is computed from: the Deployment, ready endpoints and pods. */
export function observe(
  model: InferenceModel,
  caches: Caches,
  appliedDeployment?: KubernetesObject,
): Observed {
  const namespace = model.metadata.namespace ?? "default";
  const names = childNames(model.metadata.name);
  const observed: Observed = {};
  const deployment =
    appliedDeployment ?? caches.children.Deployment.get(names.deployment, namespace);
  if (deployment && isControlledBy(deployment, model))
    observed.deployment = observeDeployment(deployment);
  const slices = caches.slices.list(namespace).filter((s) => serviceNameOf(s) === names.service);
  if (slices.length > 0) observed.endpointsReady = readyAddresses(slices, names.service).size;
  observed.pods = caches.pods
    .list(namespace)
    .filter((p) => p.metadata?.labels?.[LABEL_MODEL] === model.metadata.name);
  return observed;
}
