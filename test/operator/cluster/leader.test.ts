import { AppsV1Api, CoordinationV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  createTestNamespace,
  ensureFakeNodes,
  eventually,
  testCluster,
} from "../../support/cluster.js";
import { startOperatorProcess, type OperatorProcess } from "../../support/operator-process.js";
import {
  applyModel,
  BASIC_SPEC,
  metricsText,
  metricValue,
  modelObject,
  readModel,
  waitForCondition,
} from "./support.js";

/** Short Lease timings so a takeover is seconds, not the default 15 s. */
const FAST_LEASE = [
  "--lease-duration-seconds=3",
  "--renew-deadline-seconds=2",
  "--retry-period-seconds=0.25",
];

describe("operator replicas: leader election, restarts", () => {
  let kc: KubeConfig;
  let kubeconfigPath: string;
  let namespace: string;
  let remove: () => Promise<void>;
  let apps: AppsV1Api;
  const started: OperatorProcess[] = [];

  const start = async (identity: string) => {
    const op = await startOperatorProcess({
      kubeconfigPath,
      namespace,
      identity,
      args: FAST_LEASE,
    });
    started.push(op);
    return op;
  };
  const leading = async (op: OperatorProcess) =>
    metricValue(await metricsText(op.port), "modelgate_operator_leader") === 1;
  const writes = async (op: OperatorProcess) =>
    metricValue(await metricsText(op.port), "modelgate_operator_writes_total");

  beforeAll(async () => {
    ({ kc, kubeconfigPath } = await testCluster());
    await ensureFakeNodes(kc, 2);
    apps = kc.makeApiClient(AppsV1Api);
  });

  afterEach(async () => {
    await Promise.all(started.splice(0).map((op) => op.kill()));
    await remove?.();
  });

  afterAll(async () => {
    await Promise.all(started.map((op) => op.kill()));
  });

  it("lets only the leader act, and hands over when the leader stops or crashes", async () => {
    ({ namespace, remove } = await createTestNamespace(kc, "leader"));
    const a = await start("replica-a");
    await eventually(async () => expect(await leading(a)).toBe(true));
    const b = await start("replica-b");
    // b is up, synced and ready, but stands by.
    expect(await leading(b)).toBe(false);

    await applyModel(kc, modelObject(namespace, "first", BASIC_SPEC));
    await waitForCondition(kc, namespace, "first", "Ready", "True");
    expect(await writes(a)).toBeGreaterThan(0);
    expect(await writes(b)).toBe(0);

    // A clean stop releases the Lease: b takes over well before it would expire.
    const stoppedAt = Date.now();
    expect(await a.stop()).toBe(0);
    await eventually(async () => expect(await leading(b)).toBe(true), 10_000, 50);
    expect(Date.now() - stoppedAt).toBeLessThan(3_000);
    await applyModel(kc, modelObject(namespace, "second", BASIC_SPEC));
    await waitForCondition(kc, namespace, "second", "Ready", "True");
    expect(await writes(b)).toBeGreaterThan(0);

    // A crash releases nothing: c waits for the Lease to expire, then acts.
    const c = await start("replica-c");
    expect(await leading(c)).toBe(false);
    await b.kill();
    await eventually(async () => expect(await leading(c)).toBe(true), 15_000, 100);
    await applyModel(kc, modelObject(namespace, "third", BASIC_SPEC));
    await waitForCondition(kc, namespace, "third", "Ready", "True");

    const lease = await kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: "modelgate-operator", namespace });
    expect(lease.spec?.holderIdentity).toBe("replica-c");
    expect(lease.spec?.leaseTransitions).toBeGreaterThanOrEqual(2);
  });

  it("duplicates nothing when the operator is killed half-way and restarted", async () => {
    ({ namespace, remove } = await createTestNamespace(kc, "restart"));
    const names = Array.from({ length: 12 }, (_, i) => `model-${i}`);
    await Promise.all(
      names.map((name) =>
        applyModel(kc, modelObject(namespace, name, { ...BASIC_SPEC, replicas: 2 })),
      ),
    );
    const first = await start("restart-a");
    // Kill it as soon as it has started writing, so some models are done,
    // some half-done and some untouched.
    await eventually(async () => expect(await writes(first)).toBeGreaterThan(3), 20_000, 10);
    await first.kill();

    await start("restart-b");
    for (const name of names) await waitForCondition(kc, namespace, name, "Ready", "True");

    const deployments = await apps.listNamespacedDeployment({ namespace });
    expect(deployments.items.map((d) => d.metadata!.name).sort()).toEqual(
      names.map((n) => `${n}-runtime`).sort(),
    );
    const services = await kc.makeApiClient(CoreV1Api).listNamespacedService({ namespace });
    expect(services.items).toHaveLength(names.length);
    // One ReplicaSet per Deployment: the second operator applied the same
    // template, so nothing rolled.
    const sets = await apps.listNamespacedReplicaSet({ namespace });
    expect(sets.items).toHaveLength(names.length);
    for (const name of names) {
      const model = await readModel(kc, namespace, name);
      expect(model.status?.readyReplicas).toBe(2);
      const owners = deployments.items.find((d) => d.metadata!.name === `${name}-runtime`)!
        .metadata!.ownerReferences!;
      expect(owners).toHaveLength(1);
    }
  });
});
