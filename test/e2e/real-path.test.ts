import { CoreV1Api, DiscoveryV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixtureFolder } from "../runtime/support/runtime-server.js";
import { createTestNamespace, eventually, testCluster } from "../support/cluster.js";
import { startGatewayProcess, type GatewayProcess } from "../support/gateway-process.js";
import { startNodeAgent, type NodeAgent } from "../support/node-agent.js";
import { startOperatorProcess, type OperatorProcess } from "../support/operator-process.js";
import {
  applyModel,
  modelObject,
  readModel,
  waitForCondition,
} from "../operator/cluster/support.js";

/**
 * The whole path, every part real: `kubectl apply` of an InferenceModel for a
 * generated test model; the operator (a process) makes its Deployment; the
 * scheduler puts the pod on the node agent's node; the init container fetches
 * the model from a file:// source and the runtime loads it in the pod's own
 * network namespace; the pod turns Ready, the EndpointSlice controller
 * publishes its address, the gateway's cluster registry picks it up, and a
 * request through the gateway (a process) gets the model's answer.
 */
const MODEL = "tiny-nli";
const BODY = JSON.stringify({
  model: MODEL,
  input: "the striker scored a goal",
  instructions: "sports, politics",
});

describe("the real path: kubectl apply to an answer through the gateway", () => {
  let kc: KubeConfig;
  let namespace: string;
  let remove: () => Promise<void>;
  let agent: NodeAgent;
  let operator: OperatorProcess;
  let gateway: GatewayProcess;
  let core: CoreV1Api;

  const ask = () =>
    fetch(`${gateway.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": gateway.apiKey },
      body: BODY,
    });
  const pods = async (): Promise<V1Pod[]> =>
    (
      await core.listNamespacedPod({
        namespace,
        labelSelector: `app.kubernetes.io/instance=${MODEL}`,
      })
    ).items;
  const readyAddresses = async (): Promise<string[]> => {
    const slices = await kc.makeApiClient(DiscoveryV1Api).listNamespacedEndpointSlice({
      namespace,
      labelSelector: `kubernetes.io/service-name=${MODEL}`,
    });
    return slices.items
      .flatMap((s) => s.endpoints ?? [])
      .filter((e) => e.conditions?.ready === true)
      .map((e) => e.addresses[0]!)
      .sort();
  };
  /** The runtime's own count of answered requests, read from the pod's address. */
  const answered = async (podIP: string): Promise<number> => {
    const text = await (await fetch(`http://${podIP}:8080/metrics`)).text();
    return text
      .split("\n")
      .filter((l) => l.startsWith("modelgate_runtime_requests_total{"))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
  };

  beforeAll(async () => {
    const cluster = await testCluster();
    kc = cluster.kc;
    core = kc.makeApiClient(CoreV1Api);
    const modelDir = await fixtureFolder(MODEL);
    ({ namespace, remove } = await createTestNamespace(kc, "real-path"));
    agent = await startNodeAgent({
      kubeconfigPath: cluster.kubeconfigPath,
      nodeName: "real-path-0",
    });
    operator = await startOperatorProcess({
      kubeconfigPath: cluster.kubeconfigPath,
      namespace,
      identity: "real-path",
    });
    gateway = await startGatewayProcess({ kubeconfigPath: cluster.kubeconfigPath, namespace });
    await applyModel(
      kc,
      modelObject(namespace, MODEL, {
        task: "zero-shot-classification",
        source: { uri: `file://${modelDir}` },
        maxTokens: 512,
        scheduling: agent.schedulingFor(),
      }),
    );
  }, 180_000);

  afterAll(async () => {
    await gateway?.stop();
    await operator?.stop();
    // Pods go first, while the agent still runs to stop their processes.
    await core?.deleteCollectionNamespacedPod({ namespace }).catch(() => undefined);
    await agent?.stop();
    await remove?.();
  }, 120_000);

  it("serves a model applied to the cluster, through the gateway", async () => {
    // Before the pod is Ready the model is known but has nowhere to go.
    const early = await ask();
    expect([503, 400]).toContain(early.status);

    await waitForCondition(kc, namespace, MODEL, "Ready", "True", "Available", 120_000);
    // readyReplicas comes from the Deployment's status, which may trail the
    // EndpointSlice that Ready is judged on by a moment.
    await eventually(async () =>
      expect((await readModel(kc, namespace, MODEL)).status?.readyReplicas).toBe(1),
    );
    const [pod] = await pods();
    expect(pod!.spec?.nodeName).toBe(agent.nodeName);
    expect(pod!.status?.podIP).toMatch(/^10\.250\./);
    const initStatus = pod!.status?.initContainerStatuses?.[0];
    expect(initStatus?.state?.terminated?.exitCode).toBe(0);
    expect(await readyAddresses()).toEqual([pod!.status!.podIP]);

    // The registry follows the EndpointSlice within a second.
    const response = await eventually(
      async () => {
        const r = await ask();
        if (r.status !== 200) throw new Error(`gateway answered ${r.status}: ${await r.text()}`);
        return r;
      },
      5_000,
      50,
    );
    expect(response.headers.get("x-inference-type")).toBe("cloud");
    expect(response.headers.get("x-request-id")).toBeTruthy();
    const scores = (await response.json()) as Record<string, number>;
    expect(Object.keys(scores).sort()).toEqual(["politics", "sports"]);
    expect(scores.sports).toBeGreaterThan(scores.politics!);
  });

  it("spreads traffic over both replicas after a scale to two", async () => {
    await applyModel(
      kc,
      modelObject(namespace, MODEL, {
        task: "zero-shot-classification",
        source: { uri: `file://${await fixtureFolder(MODEL)}` },
        maxTokens: 512,
        scheduling: agent.schedulingFor(),
        replicas: 2,
      }),
    );
    const addresses = await eventually(
      async () => {
        const ready = await readyAddresses();
        if (ready.length !== 2) throw new Error(`${ready.length} ready endpoints`);
        return ready;
      },
      120_000,
      250,
    );
    await waitForCondition(kc, namespace, MODEL, "Ready", "True", "Available");
    await eventually(async () =>
      expect((await readModel(kc, namespace, MODEL)).status?.readyReplicas).toBe(2),
    );

    const before = await Promise.all(addresses.map(answered));
    // The burst starts once the gateway's registry holds both endpoints.
    await eventually(
      async () => {
        const text = await (await fetch(`${gateway.opsUrl}/metrics`)).text();
        const line = text
          .split("\n")
          .find(
            (l) =>
              l.startsWith("modelgate_gateway_model_ready_endpoints{") && l.includes(`"${MODEL}"`),
          );
        expect(Number(line?.slice(line.lastIndexOf(" ") + 1))).toBe(2);
      },
      10_000,
      50,
    );
    const statuses = await Promise.all(
      Array.from({ length: 40 }, () => ask().then((r) => r.status)),
    );
    expect(statuses.every((s) => s === 200)).toBe(true);
    const after = await Promise.all(addresses.map(answered));
    const served = after.map((n, i) => n - before[i]!);
    expect(served.reduce((a, b) => a + b, 0)).toBe(40);
    for (const count of served) expect(count).toBeGreaterThan(5);
  });

  it("stops sending to a deleted pod with no failed request beyond those in flight", async () => {
    const [victim] = await pods();
    const victimIP = victim!.status!.podIP!;
    const concurrency = 4;
    let stop = false;
    const failures: string[] = [];
    let total = 0;
    const loop = async () => {
      while (!stop) {
        const r = await ask().catch((err: unknown) => ({
          status: 0,
          text: () => Promise.resolve(String(err)),
        }));
        total++;
        if (r.status !== 200) failures.push(`${r.status}: ${await r.text()}`);
      }
    };
    const load = Array.from({ length: concurrency }, loop);
    await new Promise((r) => setTimeout(r, 500));
    await core.deleteNamespacedPod({ name: victim!.metadata!.name!, namespace });
    // The address leaves the ready set as soon as the pod is terminating.
    await eventually(
      async () => {
        const ready = await readyAddresses();
        if (ready.includes(victimIP)) throw new Error("still ready");
      },
      10_000,
      50,
    );
    const countAtRemoval = await answered(victimIP).catch(() => NaN);
    // Keep the load running a while after the registry must have seen it.
    await new Promise((r) => setTimeout(r, 2_000));
    const laterCount = await answered(victimIP).catch(() => countAtRemoval);
    stop = true;
    await Promise.all(load);

    expect(total).toBeGreaterThan(20);
    expect(failures.length, failures.join("\n")).toBeLessThanOrEqual(concurrency);
    // Nothing reached the terminating pod after the registry dropped it.
    if (!Number.isNaN(countAtRemoval))
      expect(laterCount - countAtRemoval).toBeLessThanOrEqual(concurrency);
    // The Deployment replaces the pod and the model is whole again.
    await eventually(
      async () => {
        const ready = await readyAddresses();
        if (ready.length !== 2) throw new Error(`${ready.length} ready endpoints`);
      },
      120_000,
      250,
    );
  });
});
