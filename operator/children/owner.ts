import type { V1ObjectMeta, V1OwnerReference } from "@kubernetes/client-node";
import { API_VERSION, KIND, type InferenceModel } from "../../crds/inference-model.js";
import { standardLabels } from "./labels.js";

/**
 * What the builders' metadata, the status, the writer and the events need of
 * a model: its metadata alone, which even an object that fails the schema has.
 */
export type ModelRef = Pick<InferenceModel, "metadata">;

/**
 * The owner reference and the metadata every child shares, made in one
 * place. `controller: true` marks the InferenceModel as the one controller
 * of the child (the operator's watches map a child back to its model through
 * it); `blockOwnerDeletion: true` makes a foreground delete of the model wait
 * for its children.
 */
export function ownerReference(model: Pick<InferenceModel, "metadata">): V1OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    name: model.metadata.name,
    uid: uidOf(model),
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** name, namespace, the full label set and the owner reference. */
export function childMetadata(model: Pick<InferenceModel, "metadata">, name: string): V1ObjectMeta {
  const { namespace } = model.metadata;
  return {
    name,
    ...(namespace === undefined ? {} : { namespace }),
    labels: standardLabels(model),
    ownerReferences: [ownerReference(model)],
  };
}

/**
 * Whether the model is the controller of this object: the operator touches
 * only such children, never an object of the same name made by someone else.
 */
export function isControlledBy(
  child: { metadata?: { ownerReferences?: V1OwnerReference[] } },
  model: Pick<InferenceModel, "metadata">,
): boolean {
  const uid = model.metadata["uid"];
  return (child.metadata?.ownerReferences ?? []).some(
    (o) => o.controller === true && o.uid === uid,
  );
}

/**
 * The model's uid. An object read from the API server always has one; a
 * missing uid means a builder was handed an object that never existed in the
 * cluster, a programming error that must not produce a child the garbage
 * collector would delete at once.
 */
export function uidOf(model: Pick<InferenceModel, "metadata">): string {
  const uid = model.metadata["uid"];
  if (typeof uid !== "string" || uid === "") {
    throw new TypeError(
      `InferenceModel ${model.metadata.name} has no metadata.uid: children are built only from objects read from the API server`,
    );
  }
  return uid;
}

/** metadata.generation, when the object has one (it always has, once stored). */
export function generationOf(model: Pick<InferenceModel, "metadata">): number | undefined {
  const generation = model.metadata["generation"];
  return typeof generation === "number" ? generation : undefined;
}
