import { describe, expect, it } from "vitest";
import { API_VERSION, KIND } from "../../../crds/inference-model.js";
import {
  selectorLabels,
  selectorString,
  standardLabels,
} from "../../../operator/children/labels.js";
import { childMetadata, ownerReference } from "../../../operator/children/owner.js";
import { LONGEST_NAME, makeModel } from "../model-fixture.js";

describe("labels", () => {
  const models = [makeModel(), makeModel({ name: LONGEST_NAME })];
  it.each(models.map((m) => [m.metadata.name, m] as const))("%s", (_, model) => {
    const selector = selectorLabels(model);
    const labels = standardLabels(model);
    expect(Object.keys(selector).sort()).toEqual([
      "app.kubernetes.io/component",
      "app.kubernetes.io/instance",
      "app.kubernetes.io/name",
    ]);
    expect(labels).toMatchObject(selector);
    expect(labels).toMatchObject({
      "app.kubernetes.io/name": "modelgate-runtime",
      "app.kubernetes.io/instance": model.metadata.name,
      "app.kubernetes.io/component": "runtime",
      "app.kubernetes.io/managed-by": "modelgate-operator",
      "app.kubernetes.io/part-of": "modelgate",
      "serving.modelgate.dev/model": model.metadata.name,
    });
    for (const value of Object.values(labels)) expect(value.length).toBeLessThanOrEqual(63);
  });

  it("publishes the selector sorted, as the scale subresource reads it", () => {
    expect(selectorString(makeModel())).toBe(
      "app.kubernetes.io/component=runtime,app.kubernetes.io/instance=smollm,app.kubernetes.io/name=modelgate-runtime",
    );
  });
});

describe("owner reference", () => {
  it("makes the InferenceModel the controlling owner", () => {
    const model = makeModel({ uid: "uid-1" });
    expect(ownerReference(model)).toEqual({
      apiVersion: API_VERSION,
      kind: KIND,
      name: "smollm",
      uid: "uid-1",
      controller: true,
      blockOwnerDeletion: true,
    });
    expect(childMetadata(model, "x")).toMatchObject({
      name: "x",
      namespace: "models",
      ownerReferences: [ownerReference(model)],
    });
  });

  it("refuses a model without a uid instead of building an orphan", () => {
    const model = makeModel();
    delete model.metadata["uid"];
    expect(() => ownerReference(model)).toThrow(/no metadata.uid/);
  });
});
