import type { V1Container, V1Deployment } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  buildDeployment,
  FETCH_CONTAINER,
  RUNTIME_CONTAINER,
  type BuildContext,
} from "../../../operator/children/deployment.js";
import { childNames } from "../../../crds/child-names.js";
import { ownerReference } from "../../../operator/children/owner.js";
import { SPEC_HASH_ANNOTATION } from "../../../operator/children/spec-hash.js";
import { LONGEST_NAME, makeModel, type ModelInput } from "../model-fixture.js";

const CTX: BuildContext = {
  image: "ghcr.io/modelgate/modelgate:0.1.0",
  imagePullPolicy: "IfNotPresent",
};

interface Case {
  name: string;
  input: ModelInput;
  replicas: number | undefined;
  fetch: string[];
  serve: string[];
  resources: Record<string, unknown>;
  /** The fetch flags are exactly these (no --revision, no --sha256 beyond them). */
  fetchExact?: boolean;
}

const SHA_A = "a".repeat(64);
const SHA_B = "b".repeat(64);

const cases: Case[] = [
  {
    name: "minimal",
    input: {},
    replicas: 1,
    fetch: ["--source=hf://HuggingFaceTB/SmolLM2-135M-Instruct", "--dest=/models/smollm"],
    serve: [
      "--model-path=/models/smollm",
      "--model-id=smollm",
      "--task=text-generation",
      "--overflow=truncate",
      "--port=8080",
    ],
    resources: {},
    fetchExact: true,
  },
  {
    name: "autoscaling: replicas left to the HPA",
    input: { spec: { replicas: 3, autoscaling: { minReplicas: 2, maxReplicas: 5 } } },
    replicas: undefined,
    fetch: ["--source=hf://HuggingFaceTB/SmolLM2-135M-Instruct", "--dest=/models/smollm"],
    serve: ["--model-path=/models/smollm"],
    resources: {},
  },
  {
    name: "resources and tuning",
    input: {
      name: "nli",
      spec: {
        model: "acme/nli-small",
        task: "zero-shot-classification",
        source: { uri: "s3://models/nli-small" },
        maxTokens: 512,
        overflow: "error",
        replicas: 2,
        resources: {
          requests: { cpu: "500m", memory: "1Gi" },
          limits: { cpu: "2", memory: "2Gi" },
        },
        runtime: {
          maxBatchSize: 16,
          batchWindowMs: 5,
          zeroShotMethod: "similarity",
          hypothesisTemplate: "This text is about {}.",
          similarityMidpoint: 0.25,
        },
      },
    },
    replicas: 2,
    fetch: ["--source=s3://models/nli-small", "--dest=/models/nli"],
    serve: [
      "--model-path=/models/nli",
      "--model-id=acme/nli-small",
      "--task=zero-shot-classification",
      "--overflow=error",
      "--max-tokens=512",
      "--max-batch-size=16",
      "--batch-window-ms=5",
      "--zero-shot-method=similarity",
      "--hypothesis-template=This text is about {}.",
      "--similarity-midpoint=0.25",
      "--port=8080",
    ],
    resources: { requests: { cpu: "500m", memory: "1Gi" }, limits: { cpu: "2", memory: "2Gi" } },
  },
  {
    name: "checksums and revision, sorted by path",
    input: {
      spec: {
        source: {
          uri: "hf://HuggingFaceTB/SmolLM2-135M-Instruct",
          revision: "main",
          checksums: { "tokenizer.json": SHA_B, "onnx/model.onnx": SHA_A },
        },
      },
    },
    replicas: 1,
    fetch: [
      "--source=hf://HuggingFaceTB/SmolLM2-135M-Instruct",
      "--dest=/models/smollm",
      "--revision=main",
      `--sha256=onnx/model.onnx=${SHA_A}`,
      `--sha256=tokenizer.json=${SHA_B}`,
    ],
    serve: ["--model-path=/models/smollm"],
    resources: {},
    fetchExact: true,
  },
  {
    name: "entity extraction",
    input: {
      name: "pii",
      spec: {
        task: "entity-extraction",
        source: { uri: "s3://models/rampart-pii" },
        runtime: { maxBatchSize: 8 },
      },
    },
    replicas: 1,
    fetch: ["--source=s3://models/rampart-pii", "--dest=/models/pii"],
    serve: [
      "--model-path=/models/pii",
      "--model-id=pii",
      "--task=entity-extraction",
      "--overflow=truncate",
      "--max-batch-size=8",
    ],
    resources: {},
  },
  {
    name: "longest name",
    input: { name: LONGEST_NAME, spec: { replicas: 0 } },
    replicas: 0,
    fetch: [`--dest=/models/${LONGEST_NAME}`],
    serve: [`--model-path=/models/${LONGEST_NAME}`, `--model-id=${LONGEST_NAME}`],
    resources: {},
  },
];

function container(list: V1Container[] | undefined, name: string): V1Container {
  const found = list?.find((c) => c.name === name);
  if (!found) throw new Error(`no container ${name}`);
  return found;
}

function pod(d: V1Deployment) {
  const spec = d.spec?.template.spec;
  if (!spec) throw new Error("no pod spec");
  return spec;
}

describe("buildDeployment", () => {
  it.each(cases)("$name", (c) => {
    const model = makeModel(c.input);
    const d = buildDeployment(model, CTX);
    const spec = d.spec!;

    expect(d).toMatchObject({ apiVersion: "apps/v1", kind: "Deployment" });
    expect(d.metadata?.name).toBe(childNames(model.metadata.name).deployment);
    expect(d.metadata?.name?.length).toBeLessThanOrEqual(63);
    expect(d.metadata?.ownerReferences).toEqual([ownerReference(model)]);

    // replicas: omitted (not undefined-valued) when the HPA owns it.
    if (c.replicas === undefined) expect(spec).not.toHaveProperty("replicas");
    else expect(spec.replicas).toBe(c.replicas);

    // The selector is a subset of the template's labels, else the API server rejects it.
    expect(spec.template.metadata?.labels).toMatchObject(spec.selector.matchLabels ?? {});
    expect(Object.keys(spec.selector.matchLabels ?? {})).toHaveLength(3);
    expect(spec.template.metadata?.annotations?.[SPEC_HASH_ANNOTATION]).toMatch(/^[0-9a-f]{16}$/);

    const init = container(pod(d).initContainers, FETCH_CONTAINER);
    expect(init.args?.slice(0, 2)).toEqual(["runtime", "fetch"]);
    if (c.fetchExact) expect(init.args?.slice(2)).toEqual(c.fetch);
    else expect(subsequence(init.args ?? [], c.fetch)).toBe(true);

    const main = container(pod(d).containers, RUNTIME_CONTAINER);
    expect(main.args?.slice(0, 2)).toEqual(["runtime", "serve"]);
    expect(subsequence(main.args ?? [], c.serve)).toBe(true);
    // Threads are the runtime's to choose from the cgroup limit unless the spec says.
    expect(main.args?.some((a) => a.startsWith("--threads"))).toBe(false);

    expect(main.resources).toEqual(c.resources);
    expect(init.resources).toEqual(c.resources);
  });

  it("joins each flag to its value, so no value is read as a flag", () => {
    const d = buildDeployment(makeModel(cases[2]!.input), CTX);
    for (const c of [...(pod(d).initContainers ?? []), ...pod(d).containers]) {
      expect(c.args?.slice(2).every((a) => /^--[a-z0-9-]+=/.test(a))).toBe(true);
    }
  });

  it("passes --threads when the spec sets it", () => {
    const d = buildDeployment(makeModel({ spec: { runtime: { threads: 3 } } }), CTX);
    const args = container(pod(d).containers, RUNTIME_CONTAINER).args ?? [];
    expect(subsequence(args, ["--threads=3"])).toBe(true);
  });

  it("serves on 8080 named http, with probes on the runtime's health paths", () => {
    const main = container(pod(buildDeployment(makeModel(), CTX)).containers, RUNTIME_CONTAINER);
    expect(main.ports).toEqual([{ name: "http", containerPort: 8080, protocol: "TCP" }]);
    expect(main.readinessProbe?.httpGet).toMatchObject({ path: "/v2/health/ready", port: "http" });
    expect(main.livenessProbe?.httpGet).toMatchObject({ path: "/v2/health/live", port: "http" });
    expect(main.startupProbe?.httpGet).toMatchObject({ path: "/v2/health/ready", port: "http" });
    // A long model load is not killed: at least ten minutes of startup budget.
    const s = main.startupProbe!;
    expect((s.periodSeconds ?? 10) * (s.failureThreshold ?? 3)).toBeGreaterThanOrEqual(600);
  });

  it("mounts the model volume at /models (read-only for the runtime) and /tmp on an emptyDir", () => {
    const p = pod(buildDeployment(makeModel(), CTX));
    const init = container(p.initContainers, FETCH_CONTAINER);
    const main = container(p.containers, RUNTIME_CONTAINER);
    expect(init.volumeMounts).toEqual(
      expect.arrayContaining([{ name: "models", mountPath: "/models" }]),
    );
    expect(main.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: "models", mountPath: "/models", readOnly: true },
        { name: "tmp", mountPath: "/tmp" },
      ]),
    );
    expect(p.volumes).toEqual([
      { name: "models", emptyDir: {} },
      { name: "tmp", emptyDir: {} },
    ]);
  });

  it("is hardened: non-root, read-only root, no capabilities, RuntimeDefault seccomp", () => {
    const p = pod(buildDeployment(makeModel(), CTX));
    expect(p.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(p.automountServiceAccountToken).toBe(false);
    expect(p.enableServiceLinks).toBe(false);
    for (const c of [...(p.initContainers ?? []), ...p.containers]) {
      expect(c.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ["ALL"] },
      });
      expect(c.terminationMessagePolicy).toBe("FallbackToLogsOnError");
    }
  });

  it("takes image, pull policy, command and fetch environment from the context", () => {
    const ctx: BuildContext = {
      image: "registry.local/modelgate:dev",
      imagePullPolicy: "Never",
      command: ["node", "/app/dist/cli/modelgate.js"],
      fetchEnv: [{ name: "HF_ENDPOINT", value: "http://127.0.0.1:9000" }],
    };
    const p = pod(buildDeployment(makeModel(), ctx));
    for (const c of [...(p.initContainers ?? []), ...p.containers]) {
      expect(c).toMatchObject({ image: ctx.image, imagePullPolicy: "Never", command: ctx.command });
    }
    expect(container(p.initContainers, FETCH_CONTAINER).env).toEqual(ctx.fetchEnv);
    expect(container(p.containers, RUNTIME_CONTAINER)).not.toHaveProperty("env");
  });

  it("copies spec.scheduling into the pod template, and leaves it out when unset", () => {
    const plain = buildDeployment(makeModel(), CTX).spec!.template.spec!;
    expect(plain.nodeSelector).toBeUndefined();
    expect(plain.tolerations).toBeUndefined();
    const toleration = { key: "gpu", operator: "Exists" as const, effect: "NoSchedule" as const };
    const pinned = makeModel({
      spec: { scheduling: { nodeSelector: { pool: "cpu-large" }, tolerations: [toleration] } },
    });
    const pod = buildDeployment(pinned, CTX).spec!.template.spec!;
    expect(pod.nodeSelector).toEqual({ pool: "cpu-large" });
    expect(pod.tolerations).toEqual([toleration]);
  });

  it("is pure: equal inputs give equal objects", () => {
    expect(buildDeployment(makeModel(), CTX)).toEqual(buildDeployment(makeModel(), CTX));
  });
});

/** True when `needle` appears in `haystack` as consecutive elements. */
function subsequence(haystack: readonly string[], needle: readonly string[]): boolean {
  if (needle.length === 0) return true;
  for (let i = 0; i + needle.length <= haystack.length; i++) {
    if (needle.every((n, j) => haystack[i + j] === n)) return true;
  }
  return false;
}
