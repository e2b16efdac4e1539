import type { V1DeploymentStatus, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { CONDITION_REASONS, type Condition } from "../../crds/conditions.js";
import {
  computeStatus,
  observeDeployment,
  type ModelStatus,
  type Observed,
  type ObservedDeployment,
} from "../../operator/status.js";
import { checkSpec } from "../../operator/spec-check.js";
import { makeModel, type ModelInput } from "./model-fixture.js";

const T1 = "2026-05-01T10:00:00Z";
const T2 = "2026-05-01T10:01:00Z";
const T3 = "2026-05-01T10:02:00Z";

function deployment(status: V1DeploymentStatus, desired = 2, generation = 1): ObservedDeployment {
  return {
    generation,
    desiredReplicas: desired,
    status: { observedGeneration: generation, ...status },
  };
}
const AVAILABLE = deployment({
  replicas: 2,
  updatedReplicas: 2,
  readyReplicas: 2,
  availableReplicas: 2,
});
const ROLLING_FROM_OLD = deployment(
  { replicas: 3, updatedReplicas: 1, readyReplicas: 2, availableReplicas: 2 },
  2,
  2,
);
const FRESH = deployment({
  replicas: 2,
  updatedReplicas: 2,
  readyReplicas: 0,
  availableReplicas: 0,
});

function cond(status: ModelStatus, type: Condition["type"]): Condition {
  const found = status.conditions.find((c) => c.type === type);
  if (!found) throw new Error(`no ${type} condition`);
  return found;
}

function brief(status: ModelStatus): Record<string, string> {
  return Object.fromEntries(status.conditions.map((c) => [c.type, `${c.status}/${c.reason}`]));
}

function initCrashLoop(message: string): V1Pod {
  return {
    metadata: { name: "smollm-runtime-abc-1" },
    status: {
      initContainerStatuses: [
        {
          name: "fetch",
          image: "modelgate:test",
          imageID: "",
          ready: false,
          restartCount: 3,
          state: { waiting: { reason: "CrashLoopBackOff" } },
          lastState: { terminated: { exitCode: 1, reason: "Error", message } },
        },
      ],
    },
  };
}

function runtimePod(state: NonNullable<V1Pod["status"]>["containerStatuses"]): V1Pod {
  return { metadata: { name: "smollm-runtime-abc-2" }, status: { containerStatuses: state } };
}

const cases: {
  name: string;
  input?: ModelInput;
  observed: Observed;
  expected: Record<string, string>;
}[] = [
  {
    name: "new: no Deployment yet",
    observed: {},
    expected: {
      Ready: "False/RollingOut",
      Progressing: "True/RollingOut",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "pods created, none ready yet",
    observed: { deployment: FRESH },
    expected: {
      Ready: "False/RollingOut",
      Progressing: "True/RollingOut",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "available",
    observed: { deployment: AVAILABLE },
    expected: {
      Ready: "True/Available",
      Progressing: "False/Available",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "rolling out while old pods serve",
    observed: { deployment: ROLLING_FROM_OLD },
    expected: {
      Ready: "True/Available",
      Progressing: "True/RollingOut",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "template not yet seen by the Deployment controller",
    observed: { deployment: { ...AVAILABLE, generation: 2 } },
    expected: {
      Ready: "True/Available",
      Progressing: "True/RollingOut",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "no ready endpoint although the Deployment counts one available",
    observed: { deployment: AVAILABLE, endpointsReady: 0 },
    expected: {
      Ready: "False/RollingOut",
      Progressing: "False/Available",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "scaled to zero",
    input: { spec: { replicas: 0 } },
    observed: { deployment: deployment({ replicas: 0 }, 0) },
    expected: {
      Ready: "False/ScaledToZero",
      Progressing: "False/ScaledToZero",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "scaling down to zero",
    input: { spec: { replicas: 0 } },
    observed: {
      deployment: deployment({ replicas: 1, updatedReplicas: 1, availableReplicas: 1 }, 0),
    },
    expected: {
      Ready: "True/Available",
      Progressing: "True/RollingOut",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "progress deadline exceeded",
    observed: {
      deployment: deployment({
        replicas: 2,
        updatedReplicas: 2,
        availableReplicas: 0,
        conditions: [
          {
            type: "Progressing",
            status: "False",
            reason: "ProgressDeadlineExceeded",
            message: 'ReplicaSet "x" has timed out progressing.',
          },
        ],
      }),
    },
    expected: {
      Ready: "False/RolloutStalled",
      Progressing: "False/RolloutStalled",
      Degraded: "True/RolloutStalled",
    },
  },
  {
    name: "quota refuses pods",
    observed: {
      deployment: deployment({
        replicas: 0,
        conditions: [
          {
            type: "ReplicaFailure",
            status: "True",
            reason: "FailedCreate",
            message: "exceeded quota",
          },
        ],
      }),
    },
    expected: {
      Ready: "False/RolloutStalled",
      Progressing: "False/RolloutStalled",
      Degraded: "True/RolloutStalled",
    },
  },
  {
    name: "fetch failing",
    observed: {
      deployment: FRESH,
      pods: [
        initCrashLoop(
          '{"event":"start"}\nmodelgate runtime fetch: source_not_found: hf://org/x not found\n',
        ),
      ],
    },
    expected: {
      Ready: "False/FetchFailed",
      Progressing: "True/RollingOut",
      Degraded: "True/FetchFailed",
    },
  },
  {
    name: "image cannot be pulled",
    observed: {
      deployment: FRESH,
      pods: [
        runtimePod([
          {
            name: "runtime",
            image: "x",
            imageID: "",
            ready: false,
            restartCount: 0,
            state: { waiting: { reason: "ImagePullBackOff", message: "pull access denied" } },
          },
        ]),
      ],
    },
    expected: {
      Ready: "False/RuntimeFailed",
      Progressing: "True/RollingOut",
      Degraded: "True/RuntimeFailed",
    },
  },
  {
    name: "runtime crash-looping",
    observed: {
      deployment: FRESH,
      pods: [
        runtimePod([
          {
            name: "runtime",
            image: "x",
            imageID: "",
            ready: false,
            restartCount: 2,
            state: { waiting: { reason: "CrashLoopBackOff" } },
            lastState: { terminated: { exitCode: 1, message: "model folder has no onnx graph" } },
          },
        ]),
      ],
    },
    expected: {
      Ready: "False/RuntimeFailed",
      Progressing: "True/RollingOut",
      Degraded: "True/RuntimeFailed",
    },
  },
  {
    name: "a runtime that crashed once and now runs is fine",
    observed: {
      deployment: AVAILABLE,
      pods: [
        runtimePod([
          {
            name: "runtime",
            image: "x",
            imageID: "",
            ready: true,
            restartCount: 1,
            state: { running: {} },
            lastState: { terminated: { exitCode: 137, reason: "OOMKilled" } },
          },
        ]),
      ],
    },
    expected: {
      Ready: "True/Available",
      Progressing: "False/Available",
      Degraded: "False/AsExpected",
    },
  },
  {
    name: "pvc:// source, nothing deployed",
    input: { spec: { source: { uri: "pvc://models/smollm" } } },
    observed: {},
    expected: {
      Ready: "False/InvalidSpec",
      Progressing: "False/InvalidSpec",
      Degraded: "True/InvalidSpec",
    },
  },
  {
    name: "pvc:// edit while the previous spec's pods serve",
    input: { spec: { source: { uri: "pvc://models/smollm" } } },
    observed: { deployment: AVAILABLE },
    expected: {
      Ready: "True/Available",
      Progressing: "False/InvalidSpec",
      Degraded: "True/InvalidSpec",
    },
  },
];

describe("computeStatus", () => {
  it.each(cases)("$name", ({ input, observed, expected }) => {
    const status = computeStatus(checkSpec(makeModel({ generation: 4, ...input })), observed, T1);
    expect(brief(status)).toEqual(expected);
    expect(status.conditions.map((c) => c.type)).toEqual(["Ready", "Progressing", "Degraded"]);
    for (const c of status.conditions) {
      expect(CONDITION_REASONS).toContain(c.reason);
      expect(c.observedGeneration).toBe(4);
      expect(c.lastTransitionTime).toBe(T1);
      if (c.status !== "False" || c.type !== "Degraded") expect(c.message).not.toBe("");
    }
    expect(status.observedGeneration).toBe(4);
  });

  it("publishes replica counts, the scale selector and the endpoint", () => {
    const status = computeStatus(
      checkSpec(makeModel({ namespace: "ml" })),
      { deployment: AVAILABLE },
      T1,
    );
    expect(status).toMatchObject({
      replicas: 2,
      readyReplicas: 2,
      selector:
        "app.kubernetes.io/component=runtime,app.kubernetes.io/instance=smollm,app.kubernetes.io/name=modelgate-runtime",
      endpoint: "http://smollm.ml.svc:8080",
    });
  });

  it("keeps lastTransitionTime while a condition's status holds, and moves it when it flips", () => {
    const model = makeModel();
    const first = computeStatus(checkSpec(model), { deployment: FRESH }, T1, undefined);
    const again = computeStatus(checkSpec(model), { deployment: FRESH }, T2, first);
    // Nothing changed: an equal status, so the controller skips the write.
    expect(again).toEqual(first);

    const up = computeStatus(checkSpec(model), { deployment: AVAILABLE }, T3, again);
    expect(cond(up, "Ready")).toMatchObject({ status: "True", lastTransitionTime: T3 });
    expect(cond(up, "Progressing")).toMatchObject({ status: "False", lastTransitionTime: T3 });
    expect(cond(up, "Degraded")).toMatchObject({ status: "False", lastTransitionTime: T1 });
  });

  it("keeps lastTransitionTime when only the reason or message changes", () => {
    const model = makeModel();
    const rolling = computeStatus(checkSpec(model), { deployment: FRESH }, T1, undefined);
    const failing = computeStatus(
      checkSpec(model),
      { deployment: FRESH, pods: [initCrashLoop("boom")] },
      T2,
      rolling,
    );
    expect(cond(failing, "Ready")).toMatchObject({ reason: "FetchFailed", lastTransitionTime: T1 });
    expect(cond(failing, "Degraded")).toMatchObject({ status: "True", lastTransitionTime: T2 });
  });

  it("reads the previous status from the model by default", () => {
    const model = makeModel();
    model.status = computeStatus(checkSpec(model), { deployment: AVAILABLE }, T1);
    expect(computeStatus(checkSpec(model), { deployment: AVAILABLE }, T2)).toEqual(model.status);
  });

  it("sets observedGeneration from the model's current generation", () => {
    const before = computeStatus(
      checkSpec(makeModel({ generation: 1 })),
      { deployment: AVAILABLE },
      T1,
    );
    const after = computeStatus(
      checkSpec(makeModel({ generation: 2 })),
      { deployment: AVAILABLE },
      T2,
      before,
    );
    expect(after.observedGeneration).toBe(2);
    expect(after.conditions.every((c) => c.observedGeneration === 2)).toBe(true);
  });

  it("copies the fetch's own error line into the condition", () => {
    const status = computeStatus(
      checkSpec(makeModel()),
      {
        deployment: FRESH,
        pods: [
          initCrashLoop(
            '{"event":"progress"}\nmodelgate runtime fetch: access_denied: 403 from hub\n',
          ),
        ],
      },
      T1,
    );
    expect(cond(status, "Degraded").message).toBe(
      "pod smollm-runtime-abc-1: model fetch failed: exit code 1: modelgate runtime fetch: access_denied: 403 from hub",
    );
  });

  it("ignores pods that are being deleted", () => {
    const pod = initCrashLoop("boom");
    pod.metadata!.deletionTimestamp = new Date(T1);
    const status = computeStatus(
      checkSpec(makeModel()),
      { deployment: AVAILABLE, pods: [pod] },
      T1,
    );
    expect(cond(status, "Degraded").status).toBe("False");
  });
});

describe("computeStatus reads the spec check's verdict", () => {
  it("reports the verdict's problems without checking the spec again", () => {
    const model = makeModel({ generation: 2 });
    const status = computeStatus(
      { valid: false, ref: model, model, status: undefined, problems: ["a: one", "b: two"] },
      { deployment: AVAILABLE },
      T1,
    );
    expect(cond(status, "Degraded")).toMatchObject({
      status: "True",
      reason: "InvalidSpec",
      message: "a: one; b: two",
    });
  });
});

/** An object stored before the CRD tightened a rule: it fails the schema, and is still judged. */
describe("computeStatus of an object that fails the schema", () => {
  const stored = {
    apiVersion: "serving.modelgate.dev/v1alpha1",
    kind: "InferenceModel",
    metadata: { name: "smollm", namespace: "ml", uid: "u-1", generation: 5 },
    spec: { task: "text-generation", source: { uri: "hf://o/m", checksums: { m: "xyz" } } },
  };

  it("is Degraded/InvalidSpec naming the field, and not ready when nothing serves", () => {
    const status = computeStatus(checkSpec(stored), {}, T1);
    expect(brief(status)).toEqual({
      Ready: "False/InvalidSpec",
      Progressing: "False/InvalidSpec",
      Degraded: "True/InvalidSpec",
    });
    expect(cond(status, "Degraded").message).toBe(
      "spec.source.checksums.m: must be a lowercase sha256 hex digest",
    );
    expect(status).toMatchObject({
      observedGeneration: 5,
      replicas: 0,
      endpoint: "http://smollm.ml.svc:8080",
    });
  });

  it("stays Ready while the pods of an earlier spec serve, counting the Deployment's replicas", () => {
    const status = computeStatus(checkSpec(stored), { deployment: AVAILABLE }, T1);
    expect(brief(status)).toEqual({
      Ready: "True/Available",
      Progressing: "False/InvalidSpec",
      Degraded: "True/InvalidSpec",
    });
    expect(cond(status, "Ready").message).toBe(
      "2 of 2 replicas ready; the latest spec is not applied (see Degraded)",
    );
  });
});

describe("observeDeployment", () => {
  it("takes generation, desired replicas and status", () => {
    expect(
      observeDeployment({
        metadata: { name: "x", generation: 3 },
        spec: { replicas: 4, selector: {}, template: {} },
        status: { replicas: 4 },
      }),
    ).toEqual({ generation: 3, desiredReplicas: 4, status: { replicas: 4 } });
  });
});
