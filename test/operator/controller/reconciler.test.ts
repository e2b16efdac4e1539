import type { KubernetesObject, V1Deployment } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { Condition } from "../../../crds/conditions.js";
import { API_VERSION, KIND, type InferenceModelStatus } from "../../../crds/inference-model.js";
import { createLogger } from "../../../lib/logger.js";
import { SPEC_HASH_ANNOTATION } from "../../../operator/children/spec-hash.js";
import type { ChildKind } from "../../../operator/controller/desired.js";
import { eventSink } from "../../../operator/controller/event-sink.js";
import { createReconciler } from "../../../operator/controller/reconciler.js";
import { memoryCluster, type MemoryCluster } from "./memory-cluster.js";

/**
 * The reconciler's decisions, pass by pass, against the in-memory world of
 * memory-cluster.ts: which writes a pass makes and in what order, which
 * events it records, and what status it leaves. The pure builders have
 * their own tests (test/operator/children/, status.test.ts); the real API
 * server's part is in test/operator/cluster/.
 */
const NS = "models";
const KEY = `${NS}/smollm`;
const NOW = "2026-05-01T10:00:00Z";
const BASIC = { task: "zero-shot-classification", source: { uri: "hf://org/model@main" } };

type Spec = Record<string, unknown>;
type Model = KubernetesObject & { spec: Spec; status?: InferenceModelStatus };

function modelObject(spec: Spec, generation = 1): Model {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: "smollm", namespace: NS, uid: "model-uid", generation },
    spec,
  };
}

class World {
  readonly cluster: MemoryCluster = memoryCluster();
  private readonly sink = eventSink(this.cluster.writer, createLogger({ level: "silent" }));
  private readonly reconcile = createReconciler({
    caches: this.cluster.view,
    writer: this.cluster.writer,
    events: this.sink,
    build: { image: "modelgate:test", imagePullPolicy: "IfNotPresent" },
    logger: createLogger({ level: "silent" }),
    now: () => NOW,
  });

  /** Puts (or replaces) the model as the API server would store it, keeping its status. */
  model(spec: Spec, generation = 1, extra: Partial<Model> = {}): void {
    const status = this.stored()?.status;
    this.cluster.view.models.put({ ...modelObject(spec, generation), status, ...extra });
  }

  stored(): Model | undefined {
    return this.cluster.view.models.get("smollm", NS) as Model | undefined;
  }

  child<T extends KubernetesObject = KubernetesObject>(
    kind: ChildKind,
    name: string,
  ): T | undefined {
    return this.cluster.view.children[kind].get(name, NS) as T | undefined;
  }

  /** One pass, with the events it recorded written out. */
  async pass(): Promise<{ writes: string[]; events: string[]; applied: KubernetesObject[] }> {
    const from = {
      writes: this.cluster.writes.length,
      events: this.cluster.events.length,
      applied: this.cluster.applied.length,
    };
    try {
      await this.reconcile(KEY);
    } finally {
      await this.sink.flush();
    }
    return {
      writes: this.cluster.writes.slice(from.writes),
      events: this.cluster.events
        .slice(from.events)
        .map(({ event }) => `${event.type} ${event.reason}: ${event.note}`),
      applied: this.cluster.applied.slice(from.applied),
    };
  }

  /**
   * `replicas` pods available and in the Service's EndpointSlice, as the
   * cluster reports them (with an HPA, the count it chose).
   */
  serve(replicas = 1): void {
    const deployment = this.child<V1Deployment>("Deployment", "smollm-runtime")!;
    deployment.spec!.replicas = replicas;
    deployment.status = {
      observedGeneration: deployment.metadata!.generation!,
      replicas,
      updatedReplicas: replicas,
      readyReplicas: replicas,
      availableReplicas: replicas,
    };
    this.cluster.view.slices.put({
      metadata: {
        name: "smollm-abcde",
        namespace: NS,
        labels: { "kubernetes.io/service-name": "smollm" },
      },
      addressType: "IPv4",
      ports: [{ name: "http", port: 8080 }],
      endpoints: Array.from({ length: replicas }, (_, i) => ({
        addresses: [`10.0.0.${i + 1}`],
        conditions: { ready: true },
      })),
    });
  }

  condition(type: Condition["type"]): string {
    const c = this.stored()?.status?.conditions?.find((x) => x.type === type);
    return `${c?.status}/${c?.reason}`;
  }
}

/** A world where the model with `spec` was reconciled once (and its pods serve, when asked). */
async function converged(spec: Spec, serving = false): Promise<World> {
  const world = new World();
  world.model(spec);
  await world.pass();
  if (serving) {
    world.serve(
      (spec.replicas as number | undefined) ??
        (spec.autoscaling as { minReplicas?: number } | undefined)?.minReplicas ??
        1,
    );
    await world.pass();
  }
  return world;
}

interface Case {
  name: string;
  /** The world before the pass. */
  given: () => World | Promise<World>;
  /** What changes just before it; nothing when absent. */
  change?: (world: World) => void;
  writes: string[];
  events: (string | RegExp)[];
  /** Anything else the case promises, about the world or the objects applied. */
  then?: (world: World, applied: KubernetesObject[]) => void;
}

const AUTOSCALING = { minReplicas: 2, maxReplicas: 5 };

const cases: Case[] = [
  {
    name: "a new model: the Service, then the Deployment, then the status",
    given: () => new World(),
    change: (w) => w.model(BASIC),
    writes: ["apply Service smollm", "apply Deployment smollm-runtime", "status smollm"],
    events: ["Normal Created: created Service smollm, Deployment smollm-runtime"],
    then: (w) => {
      expect(w.condition("Progressing")).toBe("True/RollingOut");
      expect(w.condition("Ready")).toBe("False/RollingOut");
      expect(w.condition("Degraded")).toBe("False/AsExpected");
    },
  },
  {
    name: "an unchanged world: no write at all",
    given: () => converged(BASIC, true),
    writes: [],
    events: [],
  },
  {
    name: "pods turning ready: only the status, and a Ready event",
    given: () => converged(BASIC),
    change: (w) => w.serve(),
    writes: ["status smollm"],
    events: ["Normal Ready: 1 of 1 replicas ready"],
    then: (w) => expect(w.condition("Ready")).toBe("True/Available"),
  },
  {
    name: "drift: a field edited by hand is applied again",
    given: () => converged(BASIC, true),
    change: (w) => {
      const d = w.child<V1Deployment>("Deployment", "smollm-runtime")!;
      d.spec!.template.spec!.containers[0]!.args = ["runtime", "serve"];
    },
    // The restored template is a new generation the Deployment controller
    // has not seen yet: the status says so.
    writes: ["apply Deployment smollm-runtime", "status smollm"],
    events: ["Normal Updated: updated Deployment smollm-runtime"],
    then: (w) => {
      const d = w.child<V1Deployment>("Deployment", "smollm-runtime")!;
      expect(d.spec!.template.spec!.containers[0]!.args).toContain(
        "--task=zero-shot-classification",
      );
      expect(w.condition("Progressing")).toBe("True/RollingOut");
      expect(w.condition("Ready")).toBe("True/Available");
    },
  },
  {
    name: "drift: a child deleted by hand is made again",
    given: () => converged(BASIC, true),
    change: (w) => w.cluster.view.children.Service.delete("smollm", NS),
    writes: ["apply Service smollm"],
    events: ["Normal Created: created Service smollm"],
  },
  {
    name: "a spec change the pods read: the Deployment rolls",
    given: () => converged(BASIC, true),
    change: (w) => w.model({ ...BASIC, maxTokens: 512 }, 2),
    writes: ["apply Deployment smollm-runtime", "status smollm"],
    events: ["Normal Updated: updated Deployment smollm-runtime"],
    then: (w, applied) => {
      const d = applied[0] as V1Deployment;
      expect(d.spec!.template.spec!.containers[0]!.args).toContain("--max-tokens=512");
      expect(w.stored()!.status!.observedGeneration).toBe(2);
      // The new pod template has not been seen by the Deployment controller yet.
      expect(w.condition("Progressing")).toBe("True/RollingOut");
    },
  },
  {
    name: "replicas alone: the Deployment scales without a roll, and a PDB appears",
    given: () => converged(BASIC, true),
    change: (w) => w.model({ ...BASIC, replicas: 3 }, 2),
    writes: [
      "apply Deployment smollm-runtime",
      "apply PodDisruptionBudget smollm-runtime",
      "status smollm",
    ],
    events: [
      "Normal Created: created PodDisruptionBudget smollm-runtime",
      "Normal Updated: updated Deployment smollm-runtime",
    ],
    then: (w, applied) => {
      const d = applied[0] as V1Deployment;
      expect(d.spec!.replicas).toBe(3);
      const before = w.cluster.applied.find((o) => o.kind === "Deployment") as V1Deployment;
      expect(d.spec!.template.metadata!.annotations![SPEC_HASH_ANNOTATION]).toBe(
        before.spec!.template.metadata!.annotations![SPEC_HASH_ANNOTATION],
      );
    },
  },
  {
    name: "a new model with autoscaling: the Deployment leaves replicas to the HPA, made after it",
    given: () => new World(),
    change: (w) => w.model({ ...BASIC, autoscaling: AUTOSCALING }),
    writes: [
      "apply Service smollm",
      "apply Deployment smollm-runtime",
      "apply HorizontalPodAutoscaler smollm-runtime",
      "apply PodDisruptionBudget smollm-runtime",
      "status smollm",
    ],
    events: [
      "Normal Created: created Service smollm, Deployment smollm-runtime, HorizontalPodAutoscaler smollm-runtime, PodDisruptionBudget smollm-runtime",
    ],
    then: (_, applied) => {
      expect((applied[1] as V1Deployment).spec).not.toHaveProperty("replicas");
    },
  },
  {
    name: "autoscaling on: the HPA and PDB are added; the Deployment, already as wanted, is not written",
    given: () => converged(BASIC, true),
    change: (w) => w.model({ ...BASIC, autoscaling: AUTOSCALING }, 2),
    writes: [
      "apply HorizontalPodAutoscaler smollm-runtime",
      "apply PodDisruptionBudget smollm-runtime",
      "status smollm",
    ],
    events: [
      "Normal Created: created HorizontalPodAutoscaler smollm-runtime, PodDisruptionBudget smollm-runtime",
    ],
  },
  {
    name: "the HPA's replica count is never fought",
    given: () => converged({ ...BASIC, autoscaling: AUTOSCALING }, true),
    change: (w) => w.serve(4),
    writes: ["status smollm"],
    events: [],
    then: (w) =>
      expect(w.child<V1Deployment>("Deployment", "smollm-runtime")!.spec!.replicas).toBe(4),
  },
  {
    name: "autoscaling off: the Deployment takes replicas back before the HPA and PDB go",
    given: () => converged({ ...BASIC, autoscaling: AUTOSCALING }, true),
    change: (w) => w.model(BASIC, 2),
    writes: [
      "apply Deployment smollm-runtime",
      "remove HorizontalPodAutoscaler smollm-runtime",
      "remove PodDisruptionBudget smollm-runtime",
      "status smollm",
    ],
    events: [
      "Normal Updated: updated Deployment smollm-runtime",
      "Normal Deleted: deleted HorizontalPodAutoscaler smollm-runtime, PodDisruptionBudget smollm-runtime, no longer asked for",
    ],
    then: (w, applied) => {
      expect((applied[0] as V1Deployment).spec!.replicas).toBe(1);
      expect(w.child("HorizontalPodAutoscaler", "smollm-runtime")).toBeUndefined();
    },
  },
  {
    name: "a model being deleted: nothing is written (the garbage collector takes the children)",
    given: () => converged(BASIC, true),
    change: (w) =>
      w.model({ ...BASIC, maxTokens: 9 }, 2, {
        metadata: {
          ...modelObject(BASIC).metadata,
          deletionTimestamp: new Date(NOW),
        },
      }),
    writes: [],
    events: [],
  },
  {
    name: "a model gone: nothing is written",
    given: () => converged(BASIC, true),
    change: (w) => w.cluster.view.models.delete("smollm", NS),
    writes: [],
    events: [],
  },
  {
    name: "an invalid spec on a new model: nothing applied, Degraded, and a Warning",
    given: () => new World(),
    change: (w) => w.model({ ...BASIC, source: { uri: "pvc://claim/m" } }),
    writes: ["status smollm"],
    events: [/^Warning InvalidSpec: spec\.source\.uri: source scheme "pvc:\/\/" is not supported/],
    then: (w) => {
      expect(w.condition("Degraded")).toBe("True/InvalidSpec");
      expect(w.condition("Ready")).toBe("False/InvalidSpec");
    },
  },
  {
    name: "an invalid edit of a serving model: nothing applied, the old pods keep it Ready",
    given: () => converged(BASIC, true),
    change: (w) =>
      w.model({ ...BASIC, resources: { requests: { cpu: "2" }, limits: { cpu: "1" } } }, 2),
    writes: ["status smollm"],
    events: [
      "Warning InvalidSpec: spec.resources.requests.cpu (2) exceeds spec.resources.limits.cpu (1)",
    ],
    then: (w) => {
      expect(w.condition("Ready")).toBe("True/Available");
      expect(w.condition("Progressing")).toBe("False/InvalidSpec");
    },
  },
  {
    name: "an object that fails the schema (stored before a CRD change): Degraded and a Warning, not a log line",
    given: () => converged(BASIC, true),
    change: (w) =>
      w.model({ ...BASIC, source: { uri: "hf://o/m", checksums: { "model.onnx": "abc" } } }, 2),
    writes: ["status smollm"],
    events: [
      "Warning InvalidSpec: spec.source.checksums.model.onnx: must be a lowercase sha256 hex digest",
    ],
    then: (w) => {
      expect(w.condition("Degraded")).toBe("True/InvalidSpec");
      expect(w.condition("Ready")).toBe("True/Available");
      expect(w.stored()!.status!.observedGeneration).toBe(2);
    },
  },
  {
    name: "a child's name held by another owner: left alone, with a Warning",
    given: () => {
      const w = new World();
      // The Service of a deleted model of the same name, not yet collected.
      w.cluster.view.children.Service.put({
        apiVersion: "v1",
        kind: "Service",
        metadata: {
          name: "smollm",
          namespace: NS,
          ownerReferences: [
            { apiVersion: API_VERSION, kind: KIND, name: "smollm", uid: "old", controller: true },
          ],
        },
      });
      // Not asked for either: an HPA we do not own is not deleted.
      w.cluster.view.children.HorizontalPodAutoscaler.put({
        apiVersion: "autoscaling/v2",
        kind: "HorizontalPodAutoscaler",
        metadata: { name: "smollm-runtime", namespace: NS },
      });
      return w;
    },
    change: (w) => w.model(BASIC),
    writes: ["apply Deployment smollm-runtime", "status smollm"],
    events: [
      "Normal Created: created Deployment smollm-runtime",
      /^Warning NotOwned: left alone Service smollm: another owner controls it/,
    ],
    then: (w) => {
      expect(w.child("Service", "smollm")!.metadata!.ownerReferences![0]!.uid).toBe("old");
      expect(w.child("HorizontalPodAutoscaler", "smollm-runtime")).toBeDefined();
    },
  },
];

describe("the reconciler, pass by pass", () => {
  it.each(cases)("$name", async ({ given, change, writes, events, then }) => {
    const world = await given();
    change?.(world);
    const pass = await world.pass();
    expect(pass.writes).toEqual(writes);
    expect(pass.events).toEqual(
      events.map((e): unknown => (typeof e === "string" ? e : expect.stringMatching(e))),
    );
    then?.(world, pass.applied);
    // One write at a time: the order above is the order the API server saw.
    expect(world.cluster.maxConcurrentWrites()).toBeLessThanOrEqual(1);
    // Level-triggered: a second pass over the world the first one left
    // writes nothing and records nothing.
    const again = await world.pass();
    expect(again.writes).toEqual([]);
    expect(again.events.filter((e) => !e.startsWith("Warning NotOwned"))).toEqual([]);
  });
});

describe("a write that fails", () => {
  it("stops the pass at the Service: no Deployment runs pods nothing can reach", async () => {
    const world = new World();
    world.model(BASIC);
    world.cluster.failNext("apply Service smollm");
    await expect(world.pass()).rejects.toThrow(/injected failure/);
    expect(world.cluster.writes).toEqual([]);
    expect(world.cluster.events).toEqual([]);
    // The retry finds the world as it was and does the whole pass.
    expect((await world.pass()).writes).toEqual([
      "apply Service smollm",
      "apply Deployment smollm-runtime",
      "status smollm",
    ]);
  });

  it("at the Deployment: no HPA for it, and the event names what was written", async () => {
    const world = new World();
    world.model({ ...BASIC, autoscaling: AUTOSCALING });
    world.cluster.failNext("apply Deployment smollm-runtime");
    const failed = world.pass();
    await expect(failed).rejects.toThrow(/injected failure/);
    expect(world.cluster.writes).toEqual(["apply Service smollm"]);
    expect(world.cluster.events.map((e) => e.event.note)).toEqual(["created Service smollm"]);
    expect(world.child("HorizontalPodAutoscaler", "smollm-runtime")).toBeUndefined();
  });
});
