import {
  AppsV1Api,
  AutoscalingV2Api,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  PolicyV1Api,
  type KubeConfig,
} from "@kubernetes/client-node";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GROUP, PLURAL, VERSION } from "../../../crds/inference-model.js";
import { SPEC_HASH_ANNOTATION } from "../../../operator/children/spec-hash.js";
import {
  createTestNamespace,
  ensureFakeNodes,
  eventually,
  testCluster,
  type TestCluster,
} from "../../support/cluster.js";
import { startOperatorProcess, type OperatorProcess } from "../../support/operator-process.js";
import {
  applyModel,
  BASIC_SPEC,
  condition,
  metricsText,
  metricValue,
  modelObject,
  readModel,
  rejection,
  schemaAt,
  storeUnderLooserSchema,
  type SchemaObject,
  waitForCondition,
} from "./support.js";

/**
 * The operator as a real process against the test cluster's API server,
 * controllers and kwok nodes (whose fake pods turn Ready at once).
 */
describe("the operator against the test cluster", () => {
  let cluster: TestCluster;
  let kc: KubeConfig;
  let kubeconfigPath: string;
  let binDir: string;
  let namespace: string;
  let remove: () => Promise<void>;
  let operator: OperatorProcess;
  let apps: AppsV1Api;
  let core: CoreV1Api;

  beforeAll(async () => {
    cluster = await testCluster();
    ({ kc, kubeconfigPath, binDir } = cluster);
    await ensureFakeNodes(kc, 2);
    ({ namespace, remove } = await createTestNamespace(kc, "operator"));
    apps = kc.makeApiClient(AppsV1Api);
    core = kc.makeApiClient(CoreV1Api);
    operator = await startOperatorProcess({ kubeconfigPath, namespace, identity: "op-main" });
  });

  afterAll(async () => {
    await operator?.stop();
    await remove?.();
  });

  const deployment = (name: string) =>
    apps.readNamespacedDeployment({ name: `${name}-runtime`, namespace });

  it("serves health, readiness and metrics", async () => {
    const base = `http://127.0.0.1:${operator.port}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const text = await metricsText(operator.port);
    for (const name of [
      "modelgate_operator_reconcile_total",
      "modelgate_operator_reconcile_errors_total",
      "modelgate_operator_reconcile_duration_seconds",
      "modelgate_operator_queue_depth",
      "modelgate_operator_leader",
    ]) {
      expect(text).toContain(`# TYPE ${name}`);
    }
    expect(metricValue(text, "modelgate_operator_leader")).toBe(1);
  });

  it("turns a model into a Deployment and a Service, then reports it Ready", async () => {
    await applyModel(kc, modelObject(namespace, "alpha", { ...BASIC_SPEC, maxTokens: 256 }));
    const d = await eventually(() => deployment("alpha"));
    const model = await readModel(kc, namespace, "alpha");
    expect(d.metadata?.ownerReferences).toEqual([
      expect.objectContaining({
        kind: "InferenceModel",
        name: "alpha",
        uid: model.metadata!.uid,
        controller: true,
      }),
    ]);
    expect(d.spec?.replicas).toBe(1);
    const pod = d.spec!.template.spec!;
    expect(pod.initContainers![0]!.args).toContain("--source=hf://org/model@main");
    expect(pod.containers[0]!.args).toContain("--max-tokens=256");
    expect(pod.containers[0]!.readinessProbe?.httpGet?.path).toBe("/v2/health/ready");
    expect(pod.containers[0]!.livenessProbe?.httpGet?.path).toBe("/v2/health/live");

    const svc = await core.readNamespacedService({ name: "alpha", namespace });
    expect(svc.spec?.ports?.[0]).toMatchObject({ name: "http", port: 8080 });
    expect(svc.metadata?.ownerReferences?.[0]?.uid).toBe(model.metadata!.uid);

    // No HPA and no PDB for one fixed replica.
    await expect(
      kc
        .makeApiClient(AutoscalingV2Api)
        .readNamespacedHorizontalPodAutoscaler({ name: "alpha-runtime", namespace }),
    ).rejects.toMatchObject({ code: 404 });

    await waitForCondition(kc, namespace, "alpha", "Ready", "True", "Available");
    // Ready is judged on the Service's ready endpoints; the replica counts
    // come from the Deployment's status, which may trail it by a moment.
    const ready = await waitForCondition(
      kc,
      namespace,
      "alpha",
      "Progressing",
      "False",
      "Available",
    );
    expect(ready.status).toMatchObject({
      observedGeneration: ready.metadata!.generation,
      replicas: 1,
      readyReplicas: 1,
      endpoint: `http://alpha.${namespace}.svc:8080`,
    });
    expect(condition(ready, "Progressing")).toMatchObject({ status: "False", reason: "Available" });
    expect(condition(ready, "Degraded")).toMatchObject({ status: "False", reason: "AsExpected" });
    for (const c of ready.status!.conditions!)
      expect(c.observedGeneration).toBe(ready.metadata!.generation);

    // What `kubectl describe im alpha` lists.
    const events = await eventually(async () => {
      const list = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace });
      const mine = list.items.filter((e) => e.regarding?.name === "alpha");
      const reasons = mine.map((e) => e.reason);
      if (!reasons.includes("Ready")) throw new Error(`events so far: ${reasons.join(", ")}`);
      return mine;
    });
    expect(events.map((e) => e.reason)).toEqual(expect.arrayContaining(["Created", "Ready"]));
    expect(events.find((e) => e.reason === "Created")?.note).toMatch(
      /created (Service|Deployment) alpha/,
    );
  });

  it("adds an HPA with autoscaling and a PDB with more than one replica, and removes them when the spec drops them", async () => {
    const autoscaling = { minReplicas: 2, maxReplicas: 5, targetCPUUtilizationPercentage: 60 };
    await applyModel(
      kc,
      modelObject(namespace, "scaled", {
        ...BASIC_SPEC,
        autoscaling,
        resources: { requests: { cpu: "1" } },
      }),
    );
    const hpaApi = kc.makeApiClient(AutoscalingV2Api);
    const pdbApi = kc.makeApiClient(PolicyV1Api);
    const hpa = await eventually(() =>
      hpaApi.readNamespacedHorizontalPodAutoscaler({ name: "scaled-runtime", namespace }),
    );
    expect(hpa.spec).toMatchObject({
      minReplicas: 2,
      maxReplicas: 5,
      scaleTargetRef: { kind: "Deployment", name: "scaled-runtime" },
    });
    expect(hpa.spec?.metrics?.[0]?.resource?.target.averageUtilization).toBe(60);
    const pdb = await eventually(() =>
      pdbApi.readNamespacedPodDisruptionBudget({ name: "scaled-runtime", namespace }),
    );
    expect(pdb.spec?.maxUnavailable).toBe(1);
    // The HPA owns the replica count: the operator's apply leaves it out.
    const d = await deployment("scaled");
    const managers = (d.metadata?.managedFields ?? []).filter(
      (f) => f.manager === "modelgate-operator",
    );
    expect(JSON.stringify(managers)).not.toContain('"f:replicas"');

    await applyModel(kc, modelObject(namespace, "scaled", { ...BASIC_SPEC, replicas: 1 }));
    await eventually(async () => {
      await expect(
        hpaApi.readNamespacedHorizontalPodAutoscaler({ name: "scaled-runtime", namespace }),
      ).rejects.toMatchObject({ code: 404 });
      await expect(
        pdbApi.readNamespacedPodDisruptionBudget({ name: "scaled-runtime", namespace }),
      ).rejects.toMatchObject({ code: 404 });
    });
    await eventually(async () => expect((await deployment("scaled")).spec?.replicas).toBe(1));
  });

  it("rolls the pods when the spec changes what they run, and not when only replicas change", async () => {
    await applyModel(kc, modelObject(namespace, "rolling", BASIC_SPEC));
    const first = await eventually(() => deployment("rolling"));
    const hash = first.spec!.template.metadata!.annotations![SPEC_HASH_ANNOTATION];
    await waitForCondition(kc, namespace, "rolling", "Ready", "True");

    await applyModel(kc, modelObject(namespace, "rolling", { ...BASIC_SPEC, replicas: 2 }));
    await eventually(async () => expect((await deployment("rolling")).spec?.replicas).toBe(2));
    expect(
      (await deployment("rolling")).spec!.template.metadata!.annotations![SPEC_HASH_ANNOTATION],
    ).toBe(hash);

    await applyModel(
      kc,
      modelObject(namespace, "rolling", { ...BASIC_SPEC, replicas: 2, maxTokens: 512 }),
    );
    const rolled = await eventually(async () => {
      const d = await deployment("rolling");
      expect(d.spec!.template.spec!.containers[0]!.args).toContain("--max-tokens=512");
      return d;
    });
    expect(rolled.spec!.template.metadata!.annotations![SPEC_HASH_ANNOTATION]).not.toBe(hash);
    // A second ReplicaSet is the rollout the Deployment controller started.
    await eventually(async () => {
      const sets = await apps.listNamespacedReplicaSet({
        namespace,
        labelSelector: "app.kubernetes.io/instance=rolling",
      });
      expect(sets.items.length).toBe(2);
    });
    const done = await waitForCondition(
      kc,
      namespace,
      "rolling",
      "Progressing",
      "False",
      "Available",
    );
    expect(done.status!.readyReplicas).toBe(2);
  });

  it("restores a child edited or deleted by hand", async () => {
    await applyModel(kc, modelObject(namespace, "drift", BASIC_SPEC));
    const original = await eventually(() => deployment("drift"));
    const args = original.spec!.template.spec!.containers[0]!.args!;

    await apps.patchNamespacedDeployment({
      name: "drift-runtime",
      namespace,
      body: [
        {
          op: "replace",
          path: "/spec/template/spec/containers/0/args",
          value: ["runtime", "serve"],
        },
        { op: "remove", path: "/metadata/labels/app.kubernetes.io~1part-of" },
      ],
    });
    await eventually(async () => {
      const d = await deployment("drift");
      expect(d.spec!.template.spec!.containers[0]!.args).toEqual(args);
      expect(d.metadata?.labels?.["app.kubernetes.io/part-of"]).toBe("modelgate");
    });

    const before = await core.readNamespacedService({ name: "drift", namespace });
    await core.deleteNamespacedService({ name: "drift", namespace });
    const after = await eventually(async () => {
      const svc = await core.readNamespacedService({ name: "drift", namespace });
      expect(svc.metadata?.uid).not.toBe(before.metadata?.uid);
      return svc;
    });
    expect(after.spec?.ports?.[0]?.name).toBe("http");
  });

  it("reconciles `kubectl scale im/NAME` through the scale subresource", () => {
    return (async () => {
      await applyModel(
        kc,
        modelObject(namespace, "kscale", { ...BASIC_SPEC, model: "org/kscale" }),
      );
      await waitForCondition(kc, namespace, "kscale", "Ready", "True");
      execFileSync(
        join(binDir, "kubectl"),
        ["--kubeconfig", kubeconfigPath, "-n", namespace, "scale", "im/kscale", "--replicas=3"],
        { stdio: "pipe" },
      );
      await eventually(async () => expect((await deployment("kscale")).spec?.replicas).toBe(3));
      const model = await eventually(async () => {
        const m = await readModel(kc, namespace, "kscale");
        expect(m.status!.readyReplicas).toBe(3);
        return m;
      });
      expect(model.status!.selector).toBe(
        "app.kubernetes.io/component=runtime,app.kubernetes.io/instance=kscale,app.kubernetes.io/name=modelgate-runtime",
      );
      const printed = execFileSync(
        join(binDir, "kubectl"),
        ["--kubeconfig", kubeconfigPath, "-n", namespace, "get", "im", "kscale"],
        { encoding: "utf8" },
      );
      expect(printed).toMatch(/MODEL\s+TASK\s+REPLICAS\s+READY\s+AGE/);
      expect(printed).toMatch(/kscale\s+org\/kscale\s+zero-shot-classification\s+3\s+True/);
    })();
  });

  it("reports a spec that cannot work as Degraded, applies nothing, and keeps running", async () => {
    await applyModel(
      kc,
      modelObject(namespace, "broken", { ...BASIC_SPEC, source: { uri: "ftp://host/model" } }),
    );
    const model = await waitForCondition(
      kc,
      namespace,
      "broken",
      "Degraded",
      "True",
      "InvalidSpec",
    );
    expect(condition(model, "Degraded")!.message).toMatch(/spec\.source\.uri: .*ftp/);
    expect(condition(model, "Ready")).toMatchObject({ status: "False", reason: "InvalidSpec" });
    await expect(deployment("broken")).rejects.toMatchObject({ code: 404 });
    expect(operator.child.exitCode).toBeNull();

    // Fixing the spec is enough: no restart, no manual step.
    await applyModel(kc, modelObject(namespace, "broken", BASIC_SPEC));
    await waitForCondition(kc, namespace, "broken", "Ready", "True");
    const fixed = await readModel(kc, namespace, "broken");
    expect(condition(fixed, "Degraded")).toMatchObject({ status: "False" });
  });

  it("reports an object stored before the CRD tightened a rule as Degraded/InvalidSpec, with an Event", async () => {
    // Stored while spec.source.checksums took any string; the CRD now wants
    // sha256 digests, and the operator's schema is the CRD's.
    await storeUnderLooserSchema(
      cluster,
      (schema) => {
        const digest = schemaAt(schema, "spec.source.checksums").additionalProperties;
        delete (digest as SchemaObject).pattern;
      },
      modelObject(namespace, "stale", {
        ...BASIC_SPEC,
        source: { uri: "hf://org/model@main", checksums: { "model.onnx": "md5:0cc175b9" } },
      }),
    );
    const model = await waitForCondition(kc, namespace, "stale", "Degraded", "True", "InvalidSpec");
    expect(condition(model, "Degraded")!.message).toBe(
      "spec.source.checksums.model.onnx: must be a lowercase sha256 hex digest",
    );
    expect(condition(model, "Ready")).toMatchObject({ status: "False", reason: "InvalidSpec" });
    expect(model.status!.observedGeneration).toBe(model.metadata!.generation);
    await expect(deployment("stale")).rejects.toMatchObject({ code: 404 });
    const warning = await eventually(async () => {
      const list = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace });
      const found = list.items.find(
        (e) => e.regarding?.name === "stale" && e.reason === "InvalidSpec",
      );
      if (!found) throw new Error("no InvalidSpec event yet");
      return found;
    });
    expect(warning).toMatchObject({
      type: "Warning",
      note: "spec.source.checksums.model.onnx: must be a lowercase sha256 hex digest",
      regarding: { kind: "InferenceModel", uid: model.metadata!.uid },
    });
    expect(operator.child.exitCode).toBeNull();

    // Fixing the field is enough.
    await applyModel(kc, modelObject(namespace, "stale", BASIC_SPEC));
    await waitForCondition(kc, namespace, "stale", "Ready", "True");
  });

  it("has the API server reject objects the schema forbids, with the schema's message", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...BASIC_SPEC, task: "translation" }, /spec\.task: Unsupported value: "translation"/],
      [{ task: "text-generation" }, /spec\.source: Required value/],
      [
        { ...BASIC_SPEC, autoscaling: { minReplicas: 4, maxReplicas: 2 } },
        /minReplicas must not exceed maxReplicas/,
      ],
      [{ ...BASIC_SPEC, maxTokens: 0 }, /spec\.maxTokens: Invalid value: 0/],
      [{ ...BASIC_SPEC, overflow: "drop" }, /spec\.overflow: Unsupported value: "drop"/],
    ];
    for (const [spec, message] of cases) {
      const problem = await rejection(kc, modelObject(namespace, "rejected", spec));
      expect(String(problem), JSON.stringify(spec)).toMatch(message);
    }
  });

  it("collects every child when the model is deleted", async () => {
    await applyModel(kc, modelObject(namespace, "doomed", { ...BASIC_SPEC, replicas: 2 }));
    await waitForCondition(kc, namespace, "doomed", "Ready", "True");
    await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      namespace,
      name: "doomed",
    });
    await eventually(async () => {
      await expect(deployment("doomed")).rejects.toMatchObject({ code: 404 });
      await expect(core.readNamespacedService({ name: "doomed", namespace })).rejects.toMatchObject(
        {
          code: 404,
        },
      );
      await expect(
        kc
          .makeApiClient(PolicyV1Api)
          .readNamespacedPodDisruptionBudget({ name: "doomed-runtime", namespace }),
      ).rejects.toMatchObject({ code: 404 });
      const pods = await core.listNamespacedPod({
        namespace,
        labelSelector: "app.kubernetes.io/instance=doomed",
      });
      expect(pods.items).toEqual([]);
    }, 30_000);
  });
});
