import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  CoordinationV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type V1ContainerStatus,
  type V1Pod,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { modelIdOf, type InferenceModel } from "../../crds/inference-model.js";
import { buildDeployment, RUNTIME_CONTAINER } from "../../operator/children/deployment.js";
import { selectorLabels } from "../../operator/children/labels.js";
import { contains, parseCidr } from "../cluster/node-agent/cidr.js";
import { netnsPrefixOf, sandboxNames } from "../cluster/node-agent/names.js";
import { generateFixtures } from "../fixtures/generate.js";
import { makeModel } from "../operator/model-fixture.js";
import { createTestNamespace, eventually, REPO_ROOT, testCluster } from "../support/cluster.js";
import { startNodeAgent, type NodeAgent } from "../support/node-agent.js";

/**
 * The node agent against the real test cluster, running the operator's own
 * pod template for a real model: the fixture NLI model is fetched by the
 * init container from a file:// source and served by the runtime on its pod
 * address. Traffic goes only to addresses inside the agent's pod range.
 */
const NODE_NAME = "modelgate-agent-test-0";
const MODEL_DIR = join(REPO_ROOT, "test", "fixtures", "models", "tiny-nli");
const LONG = 120_000;

describe("node agent", () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let namespace: string;
  let removeNamespace: () => Promise<void>;
  let agent: NodeAgent;
  const kwokNode = `modelgate-agent-test-kwok-${randomUUID().slice(0, 6)}`;

  let model: InferenceModel;
  let podIP: string;

  beforeAll(async () => {
    await generateFixtures();
    const cluster = await testCluster();
    kc = cluster.kc;
    core = kc.makeApiClient(CoreV1Api);
    ({ namespace, remove: removeNamespace } = await createTestNamespace(kc, "node-agent"));
    agent = await startNodeAgent({ kubeconfigPath: cluster.kubeconfigPath, nodeName: NODE_NAME });
  }, LONG);

  afterAll(async () => {
    // Pods first, while the agent and the kwok node can still finalize
    // them: a pod on a node nobody runs stays Terminating, and so would the
    // namespace.
    if (core) await deleteAllPods().catch(() => undefined);
    await agent?.stop();
    await removeNamespace?.();
    await core?.deleteNode({ name: NODE_NAME }).catch(() => undefined);
    await core?.deleteNode({ name: kwokNode }).catch(() => undefined);
  }, LONG);

  async function deleteAllPods(): Promise<void> {
    await core.deleteCollectionNamespacedPod({ namespace });
    await eventually(
      async () => {
        const left = await core.listNamespacedPod({ namespace });
        if (left.items.length > 0) throw new Error(`${left.items.length} pods left`);
      },
      60_000,
      200,
    );
  }

  function modelNamed(name: string, uri: string): InferenceModel {
    return makeModel({
      name,
      namespace,
      uid: randomUUID(),
      spec: { task: "zero-shot-classification", source: { uri } },
    });
  }

  /** The operator's pod template, placed on the agent's node. */
  function podFor(m: InferenceModel, name: string): V1Pod {
    const template = buildDeployment(m, {
      image: "modelgate:test",
      imagePullPolicy: "IfNotPresent",
    }).spec!.template;
    return {
      metadata: { name, namespace, labels: template.metadata?.labels ?? {} },
      spec: { ...template.spec!, ...agent.schedulingFor() },
    };
  }

  async function readPod(name: string): Promise<V1Pod> {
    return core.readNamespacedPod({ name, namespace });
  }

  function runtimeStatus(p: V1Pod): V1ContainerStatus {
    const status = p.status?.containerStatuses?.find((c) => c.name === RUNTIME_CONTAINER);
    if (!status) throw new Error("no runtime container status yet");
    return status;
  }

  function isReady(p: V1Pod): boolean {
    return p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
  }

  /** Guards the rule that tests talk to no address outside the agent's pod range. */
  function podURL(ip: string, path: string): string {
    expect(contains(parseCidr(agent.podCIDR), ip)).toBe(true);
    return `http://${ip}:8080${path}`;
  }

  function pidOf(status: V1ContainerStatus): number {
    const pid = Number(status.containerID?.split("://")[1]);
    expect(pid).toBeGreaterThan(0);
    return pid;
  }

  function alive(pid: number): boolean {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  function netnsList(): string[] {
    return execFileSync("ip", ["netns", "list"], { encoding: "utf8" })
      .split("\n")
      .map((line) => line.split(" ")[0] ?? "")
      .filter(Boolean);
  }

  it("registers a tainted, labelled node with the pod range", async () => {
    const node = await core.readNode({ name: NODE_NAME });
    expect(node.spec?.podCIDR).toBe(agent.podCIDR);
    expect(node.metadata?.labels?.["modelgate.dev/node-agent"]).toBe("true");
    expect(node.spec?.taints).toContainEqual(
      expect.objectContaining({
        key: "modelgate.dev/node-agent",
        value: "true",
        effect: "NoSchedule",
      }),
    );
    const lease = await kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: NODE_NAME, namespace: "kube-node-lease" });
    expect(lease.spec?.holderIdentity).toBe(NODE_NAME);
  });

  it(
    "runs the operator's pod: an address in the range, Ready only once the model has loaded",
    async () => {
      model = modelNamed("tiny-nli", `file://${MODEL_DIR}`);
      await core.createNamespacedPod({ namespace, body: podFor(model, "runtime-0") });
      let sawRunningNotReady = false;
      const ready = await eventually(
        async () => {
          const p = await readPod("runtime-0");
          const status = p.status?.containerStatuses?.find((c) => c.name === RUNTIME_CONTAINER);
          if (status?.state?.running && !status.ready) sawRunningNotReady = true;
          if (!isReady(p)) throw new Error(`not Ready: ${JSON.stringify(p.status?.conditions)}`);
          return p;
        },
        LONG,
        100,
      );
      podIP = ready.status!.podIP!;
      expect(contains(parseCidr(agent.podCIDR), podIP)).toBe(true);
      expect(podIP).not.toBe(agent.podCIDR.replace(/0\/24$/, "0"));
      expect(podIP).not.toBe(ready.status?.hostIP);
      expect(ready.status?.phase).toBe("Running");
      expect(ready.status?.initContainerStatuses?.[0]?.state?.terminated?.exitCode).toBe(0);
      // The runtime listens before it loads: it was running and not ready first.
      expect(sawRunningNotReady).toBe(true);
      const health = await fetch(podURL(podIP, "/v2/health/ready"));
      expect(health.status).toBe(200);
    },
    LONG,
  );

  it("answers a real classification request on the pod address", async () => {
    const response = await fetch(podURL(podIP, "/v1/responses"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: modelIdOf(model),
        input: "the striker scored a goal",
        instructions: "sports, politics",
      }),
    });
    expect(response.status).toBe(200);
    const scores = (await response.json()) as Record<string, number>;
    expect(Object.keys(scores).sort()).toEqual(["politics", "sports"]);
    for (const score of Object.values(scores)) {
      expect(score).toBeGreaterThanOrEqual(0);
      expect(score).toBeLessThanOrEqual(1);
    }
  });

  it("puts the ready pod address in the EndpointSlice of a Service", async () => {
    await core.createNamespacedService({
      namespace,
      body: {
        metadata: { name: "tiny-nli" },
        spec: {
          selector: selectorLabels(model),
          ports: [{ name: "http", port: 8080, targetPort: "http" }],
        },
      },
    });
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    await eventually(async () => {
      const slices = await discovery.listNamespacedEndpointSlice({
        namespace,
        labelSelector: "kubernetes.io/service-name=tiny-nli",
      });
      const endpoints = slices.items.flatMap((s) => s.endpoints ?? []);
      const mine = endpoints.find((e) => e.addresses.includes(podIP));
      if (!mine) throw new Error(`no endpoint for ${podIP}: ${JSON.stringify(endpoints)}`);
      expect(mine.conditions?.ready).toBe(true);
      expect(mine.nodeName).toBe(NODE_NAME);
    }, 30_000);
  });

  it(
    "restarts the runtime when its process dies, and it becomes Ready again",
    async () => {
      const before = runtimeStatus(await readPod("runtime-0"));
      expect(before.restartCount).toBe(0);
      const pid = pidOf(before);
      process.kill(pid, "SIGKILL");
      const after = await eventually(
        async () => {
          const p = await readPod("runtime-0");
          const status = runtimeStatus(p);
          if (status.restartCount !== 1 || !isReady(p)) {
            throw new Error(`restartCount ${status.restartCount}, ready ${isReady(p)}`);
          }
          return status;
        },
        LONG,
        200,
      );
      expect(after.lastState?.terminated?.exitCode).toBe(137);
      expect(pidOf(after)).not.toBe(pid);
      expect((await fetch(podURL(podIP, "/v2/health/ready"))).status).toBe(200);
    },
    LONG,
  );

  it(
    "shows a failing init container's exit and message, and retries it",
    async () => {
      const broken = modelNamed(
        "broken",
        `file://${join(REPO_ROOT, ".cache", "no-such-model-dir")}`,
      );
      await core.createNamespacedPod({ namespace, body: podFor(broken, "broken-0") });
      const status = await eventually(
        async () => {
          const p = await readPod("broken-0");
          const init = p.status?.initContainerStatuses?.[0];
          if (!init || init.restartCount < 1)
            throw new Error(`not retried yet: ${JSON.stringify(init)}`);
          expect(p.status?.phase).toBe("Pending");
          expect(p.status?.conditions).toContainEqual(
            expect.objectContaining({ type: "Initialized", status: "False" }),
          );
          return init;
        },
        60_000,
        200,
      );
      const terminated = status.state?.terminated ?? status.lastState?.terminated;
      expect(terminated?.exitCode).not.toBe(0);
      expect(terminated?.message).toMatch(/no-such-model-dir/);
    },
    LONG,
  );

  it(
    "stops the processes, removes the sandbox and deletes the object when a pod is deleted",
    async () => {
      const p = await readPod("runtime-0");
      const pid = pidOf(runtimeStatus(p));
      const { netns } = sandboxNames(NODE_NAME, p.metadata!.uid!);
      expect(netnsList()).toContain(netns);
      await core.deleteNamespacedPod({ name: "runtime-0", namespace });
      await eventually(
        async () => {
          const gone = await readPod("runtime-0").then(
            () => false,
            (err: { code?: number }) => err.code === 404,
          );
          if (!gone) throw new Error("pod object still there");
        },
        60_000,
        200,
      );
      expect(alive(pid)).toBe(false);
      expect(netnsList()).not.toContain(netns);
      const routes = execFileSync("ip", ["route", "show", `${podIP}/32`], { encoding: "utf8" });
      expect(routes.trim()).toBe("");
    },
    LONG,
  );

  it(
    "never touches a pod bound to a kwok node",
    async () => {
      await core.createNode({
        body: {
          metadata: {
            name: kwokNode,
            annotations: { "kwok.x-k8s.io/node": "fake" },
            labels: { type: "kwok" },
          },
        },
      });
      const created = await core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name: "on-kwok" },
          spec: {
            nodeName: kwokNode,
            tolerations: agent.schedulingFor().tolerations,
            containers: [{ name: "c", image: "fake", command: ["sleep", "3600"] }],
          },
        },
      });
      const running = await eventually(
        async () => {
          const p = await readPod("on-kwok");
          if (p.status?.phase !== "Running") throw new Error("kwok has not run it yet");
          return p;
        },
        30_000,
        200,
      );
      expect(contains(parseCidr(agent.podCIDR), running.status?.podIP ?? "")).toBe(false);
      expect(netnsList()).not.toContain(sandboxNames(NODE_NAME, created.metadata!.uid!).netns);
      expect(readFileSync(agent.logFile, "utf8")).not.toContain(`${namespace}/on-kwok`);
    },
    LONG,
  );

  it(
    "finalizes every pod it runs, and cleans up everything it started when it stops",
    async () => {
      await deleteAllPods();
      await agent.stop();
      expect(netnsList().filter((n) => n.startsWith(netnsPrefixOf(NODE_NAME)))).toEqual([]);
      const node = await core.readNode({ name: NODE_NAME });
      const ready = node.status?.conditions?.find((c) => c.type === "Ready");
      expect(ready?.status).toBe("False");
    },
    LONG,
  );
});
