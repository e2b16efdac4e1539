import { describe, expect, it } from "vitest";
import { buildDeployment } from "../../../operator/children/deployment.js";
import { buildHpa } from "../../../operator/children/hpa.js";
import { childNames } from "../../../crds/child-names.js";
import { ownerReference } from "../../../operator/children/owner.js";
import { buildPdb } from "../../../operator/children/pdb.js";
import { buildService, serviceEndpoint } from "../../../operator/children/service.js";
import { LONGEST_NAME, makeModel, type ModelInput } from "../model-fixture.js";

const CTX = { image: "modelgate:test", imagePullPolicy: "IfNotPresent" } as const;

describe("buildService", () => {
  it.each([{}, { name: LONGEST_NAME }, { name: "7b-chat" }] as ModelInput[])("%o", (input) => {
    const model = makeModel(input);
    const service = buildService(model);
    const pods = buildDeployment(model, CTX).spec!.template.metadata!.labels!;
    expect(service.metadata?.name).toBe(childNames(model.metadata.name).service);
    expect(service.metadata?.ownerReferences).toEqual([ownerReference(model)]);
    expect(service.spec?.type).toBe("ClusterIP");
    expect(service.spec?.ports).toEqual([
      { name: "http", port: 8080, targetPort: "http", protocol: "TCP", appProtocol: "http" },
    ]);
    // The Service selects exactly the Deployment's pods.
    expect(pods).toMatchObject(service.spec!.selector!);
    expect(service.spec?.selector).toEqual(buildDeployment(model, CTX).spec!.selector.matchLabels);
  });

  it("publishes the in-cluster address", () => {
    expect(serviceEndpoint(makeModel({ namespace: "ml" }))).toBe("http://smollm.ml.svc:8080");
    expect(serviceEndpoint(makeModel({ name: "7b", namespace: "ml" }))).toBe(
      "http://im-7b.ml.svc:8080",
    );
  });
});

describe("buildHpa", () => {
  const cases: { name: string; spec: Record<string, unknown>; expected: object | null }[] = [
    { name: "no autoscaling", spec: { replicas: 3 }, expected: null },
    {
      name: "defaults",
      spec: { autoscaling: { maxReplicas: 4 } },
      expected: { minReplicas: 1, maxReplicas: 4, cpu: 70 },
    },
    {
      name: "explicit",
      spec: {
        autoscaling: { minReplicas: 2, maxReplicas: 10, targetCPUUtilizationPercentage: 55 },
      },
      expected: { minReplicas: 2, maxReplicas: 10, cpu: 55 },
    },
  ];
  it.each(cases)("$name", ({ spec, expected }) => {
    const model = makeModel({ spec });
    const hpa = buildHpa(model);
    if (expected === null) {
      expect(hpa).toBeNull();
      return;
    }
    const { minReplicas, maxReplicas, cpu } = expected as {
      minReplicas: number;
      maxReplicas: number;
      cpu: number;
    };
    expect(hpa).toMatchObject({ apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler" });
    expect(hpa?.metadata?.ownerReferences).toEqual([ownerReference(model)]);
    expect(hpa?.spec).toEqual({
      scaleTargetRef: {
        apiVersion: "apps/v1",
        kind: "Deployment",
        name: buildDeployment(model, CTX).metadata!.name,
      },
      minReplicas,
      maxReplicas,
      metrics: [
        {
          type: "Resource",
          resource: { name: "cpu", target: { type: "Utilization", averageUtilization: cpu } },
        },
      ],
    });
  });
});

describe("buildPdb", () => {
  const cases: { name: string; spec: Record<string, unknown>; built: boolean }[] = [
    { name: "one replica", spec: { replicas: 1 }, built: false },
    { name: "scaled to zero", spec: { replicas: 0 }, built: false },
    { name: "two replicas", spec: { replicas: 2 }, built: true },
    {
      name: "autoscaling up to one",
      spec: { replicas: 5, autoscaling: { maxReplicas: 1 } },
      built: false,
    },
    {
      name: "autoscaling 1..3",
      spec: { replicas: 1, autoscaling: { maxReplicas: 3 } },
      built: true,
    },
  ];
  it.each(cases)("$name → built: $built", ({ spec, built }) => {
    const model = makeModel({ spec });
    const pdb = buildPdb(model);
    if (!built) {
      expect(pdb).toBeNull();
      return;
    }
    expect(pdb).toMatchObject({ apiVersion: "policy/v1", kind: "PodDisruptionBudget" });
    expect(pdb?.metadata?.ownerReferences).toEqual([ownerReference(model)]);
    expect(pdb?.spec).toEqual({
      maxUnavailable: 1,
      selector: { matchLabels: buildDeployment(model, CTX).spec!.selector.matchLabels },
      unhealthyPodEvictionPolicy: "AlwaysAllow",
    });
  });
});
