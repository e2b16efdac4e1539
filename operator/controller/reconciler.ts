import type { KubernetesObject } from "@kubernetes/client-node";
import { childNames } from "../../crds/child-names.js";
import { readyAddresses, serviceNameOf } from "../../lib/kube/endpoint-slices.js";
import type { Logger } from "../../lib/logger.js";
import type { BuildContext } from "../children/deployment.js";
import { LABEL_MODEL } from "../children/labels.js";
import { isControlledBy, type ModelRef } from "../children/owner.js";
import { canonicalJson } from "../children/spec-hash.js";
import { checkSpec } from "../spec-check.js";
import { computeStatus, observeDeployment, type Observed } from "../status.js";
import type { Writer } from "./cluster-writer.js";
import type { ClusterView } from "./caches.js";
import { desiredChildren } from "./desired.js";
import type { EventSink } from "./event-sink.js";
import { eventsForTransition, eventsForWrites } from "./events.js";
import { planWrites, type WritePlan } from "./plan-writes.js";

/**
 * One pass of the level-triggered loop for one model, in numbered steps. It
 * never looks at the event that caused it, so running it twice, or after a
 * missed event, converges to the same cluster.
 */

export interface ReconcilerDeps {
  caches: ClusterView;
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
    // 1. Load. Gone or going: the garbage collector removes the children
    // through their owner references; there is nothing to write.
    const slash = key.indexOf("/");
    const raw = deps.caches.models.get(key.slice(slash + 1), key.slice(0, slash));
    if (!raw || raw.metadata?.deletionTimestamp) return { changed: 0, statusWritten: false };

    // 2. Check the spec, once: the schema and the rules a schema cannot say.
    // A spec that cannot work is not applied; its problems go to the status.
    const verdict = checkSpec(raw);

    // 3. Build and apply (only a spec that can work), in order.
    let changed = 0;
    // What the API server answered to this pass's apply of the Deployment:
    // newer than the cache, so the status written below already describes it
    // instead of a "creating" status that the next event would overwrite.
    let applied: KubernetesObject | undefined;
    if (verdict.valid) {
      const plan = planWrites(
        verdict.model,
        desiredChildren(verdict.model, deps.build),
        deps.caches,
      );
      applied = await write(verdict.ref, plan);
      changed = plan.apply.length + plan.remove.length;
    } else {
      deps.logger.debug({ model: key, problems: verdict.problems }, "spec not applied");
    }

    // 4. Observe, and 5. write the status only when it changed.
    const status = computeStatus(verdict, observe(verdict.ref, deps.caches, applied), now());
    const before = verdict.status;
    if (before !== undefined && canonicalJson(before) === canonicalJson(status)) {
      return { changed, statusWritten: false };
    }
    await deps.writer.writeStatus(verdict.ref, status);
    for (const event of eventsForTransition(before, status)) deps.events.record(verdict.ref, event);
    return { changed, statusWritten: true };
  };

  /**
   * One write at a time, in the plan's order (Service, Deployment, HPA, PDB,
   * then deletions), stopping at the first failure. The order is the point:
   * a Service the API server refuses (a quota, an admission policy) stops
   * the pass before a Deployment starts pods nothing can reach, an HPA is
   * never made for a Deployment that failed to apply (it would report
   * FailedGetScale until the next pass), and an HPA that is no longer asked
   * for goes only after the Deployment carries its own replica count again.
   * Events name what was written, also when a later write failed.
   */
  async function write(model: ModelRef, plan: WritePlan): Promise<KubernetesObject | undefined> {
    const done: WritePlan = { apply: [], remove: [], notOwned: plan.notOwned };
    let deployment: KubernetesObject | undefined;
    try {
      for (const step of plan.apply) {
        const result = await deps.writer.apply(step.obj);
        if (result.kind === "Deployment") deployment = result;
        done.apply.push(step);
      }
      for (const ref of plan.remove) {
        await deps.writer.remove(ref);
        done.remove.push(ref);
      }
    } finally {
      for (const event of eventsForWrites(done)) deps.events.record(model, event);
    }
    return deployment;
  }
}

/** What the status is computed from: the Deployment, ready endpoints and pods. */
export function observe(
  model: ModelRef,
  caches: ClusterView,
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
