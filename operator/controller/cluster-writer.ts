import {
  ApiException,
  CustomObjectsApi,
  EventsV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { GROUP, PLURAL, VERSION } from "../../crds/inference-model.js";
import { uidOf, type ModelRef } from "../children/owner.js";
import type { ModelStatus } from "../status.js";
import type { ChildRef } from "./desired.js";

/**
 * Every write the operator makes, in one thin shell over the API: children
 * by server-side apply under one field manager (so the operator owns exactly
 * the fields it sets, and `force` takes back a field someone edited by
 * hand), status through the status subresource, and events.
 */
export const FIELD_MANAGER = "modelgate-operator";

export interface ModelEvent {
  type: "Normal" | "Warning";
  reason: string;
  note: string;
  action: string;
}

export interface Writer {
  apply(obj: KubernetesObject): Promise<KubernetesObject>;
  /** Deletes a child; a child already gone is not an error. */
  remove(ref: ChildRef): Promise<void>;
  writeStatus(model: ModelRef, status: ModelStatus): Promise<void>;
  event(model: ModelRef, event: ModelEvent): Promise<void>;
}

export function clusterWriter(kc: KubeConfig, reportingInstance: string): Writer {
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const events = kc.makeApiClient(EventsV1Api);
  const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

  return {
    apply: (obj) =>
      objects.patch(obj, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply),

    async remove(ref) {
      try {
        await objects.delete(
          {
            apiVersion: ref.apiVersion,
            kind: ref.kind,
            metadata: { name: ref.name, namespace: ref.namespace },
          },
          undefined,
          undefined,
          undefined,
          undefined,
          "Background",
        );
      } catch (err) {
        if (!(err instanceof ApiException && err.code === 404)) throw err;
      }
    },

    async writeStatus(model, status) {
      await custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace: model.metadata.namespace ?? "default",
          name: model.metadata.name,
          // A merge patch replaces `conditions` whole: the status is computed
          // whole each time, so nothing stale can survive in it.
          body: { status },
        },
        mergePatch,
      );
    },

    async event(model, event) {
      const namespace = model.metadata.namespace ?? "default";
      const now = new V1MicroTime();
      await events.createNamespacedEvent({
        namespace,
        body: {
          // <object>.<hex nanoseconds>, as client-go names events.
          metadata: { name: `${model.metadata.name}.${eventSuffix(now)}`, namespace },
          eventTime: now,
          type: event.type,
          reason: event.reason,
          action: event.action,
          note: event.note.slice(0, 1024),
          reportingController: `${GROUP}/operator`,
          reportingInstance: reportingInstance.slice(0, 128),
          regarding: {
            apiVersion: `${GROUP}/${VERSION}`,
            kind: "InferenceModel",
            name: model.metadata.name,
            namespace,
            uid: uidOf(model),
          },
        },
      });
    },
  };
}

let lastSuffix = 0n;

/** Unique per process even for two events in one millisecond. */
function eventSuffix(now: Date): string {
  let nanos = BigInt(now.getTime()) * 1_000_000n;
  if (nanos <= lastSuffix) nanos = lastSuffix + 1n;
  lastSuffix = nanos;
  return nanos.toString(16);
}
