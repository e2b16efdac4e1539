import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { KubeConfig } from "@kubernetes/client-node";
import {
  ApiextensionsV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { parse } from "yaml";
import { loadKubeConfig } from "../../lib/kube/kube-config.js";

/**
 * The test cluster of test/cluster/ for tests that need a real API server.
 * `up.sh` starts it (building the binaries once) or reuses a running one in
 * well under a second, so every test file can ask for it; nothing is ever
 * skipped when it is missing.
 */
export const REPO_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const CLUSTER_DIR = join(REPO_ROOT, "test", "cluster");
export const CRD_FILE = join(REPO_ROOT, "crds", "inference-model.crd.yaml");
/** The field manager tests use for objects they write themselves. */
export const TEST_FIELD_MANAGER = "modelgate-tests";

export interface TestCluster {
  kubeconfigPath: string;
  kc: KubeConfig;
  /** The folder with kubectl, helm, kwokctl and the control-plane binaries. */
  binDir: string;
}

let cached: TestCluster | undefined;

/** Starts or reuses the cluster; the CRD is applied and Established. */
export async function testCluster(): Promise<TestCluster> {
  if (cached) return cached;
  const kubeconfigPath = execFileSync(join(CLUSTER_DIR, "up.sh"), {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  })
    .trim()
    .split("\n")
    .pop()!;
  const binDir = execFileSync(
    "bash",
    ["-c", `source "${join(CLUSTER_DIR, "versions.sh")}" && echo "$BIN_DIR"`],
    { encoding: "utf8" },
  ).trim();
  const kc = loadKubeConfig(kubeconfigPath);
  applyCrd(kubeconfigPath, binDir);
  await waitEstablished(kc);
  cached = { kubeconfigPath, kc, binDir };
  return cached;
}

/**
 * kubectl, not the client library: the library serializes through its typed
 * models, which know JSON-schema keywords such as `enum` and `default` only
 * under other names and drop them, leaving a CRD without its validation.
 */
function applyCrd(kubeconfigPath: string, binDir: string): void {
  execFileSync(
    join(binDir, "kubectl"),
    [
      "--kubeconfig",
      kubeconfigPath,
      "apply",
      "--server-side",
      "--force-conflicts",
      `--field-manager=${TEST_FIELD_MANAGER}`,
      "-f",
      CRD_FILE,
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
}

async function waitEstablished(kc: KubeConfig): Promise<void> {
  const crd = parse(readFileSync(CRD_FILE, "utf8")) as KubernetesObject;
  const api = kc.makeApiClient(ApiextensionsV1Api);
  await eventually(async () => {
    const got = await api.readCustomResourceDefinition({ name: crd.metadata!.name! });
    const established = got.status?.conditions?.find((c) => c.type === "Established");
    if (established?.status !== "True") throw new Error("CRD not Established yet");
  }, 30_000);
}

/** Applies an object as the tests' field manager, taking over conflicts. */
export async function serverSideApply<T extends KubernetesObject>(
  kc: KubeConfig,
  obj: T,
): Promise<T> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  return api.patch(
    obj,
    undefined,
    undefined,
    TEST_FIELD_MANAGER,
    true,
    PatchStrategy.ServerSideApply,
  );
}

/**
 * A namespace of the test's own, so test files sharing the cluster never see
 * each other's objects. Call the returned function in afterAll.
 */
export async function createTestNamespace(
  kc: KubeConfig,
  prefix: string,
): Promise<{ namespace: string; remove: () => Promise<void> }> {
  const namespace = `${prefix}-${randomBytes(3).toString("hex")}`;
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({
    body: { metadata: { name: namespace, labels: { "modelgate.dev/test": "true" } } },
  });
  return {
    namespace,
    remove: async () => {
      await core.deleteNamespace({ name: namespace }).catch(() => undefined);
    },
  };
}

/** Retries `check` until it stops throwing; rethrows its last error at the deadline. */
export async function eventually<T>(
  check: () => Promise<T> | T,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}

/**
 * At least `count` kwok-managed fake nodes (named `kwok-fake-N`), created
 * through the API rather than `kwokctl scale`, which sets an exact count and
 * would take away nodes another test file is using.
 */
export async function ensureFakeNodes(kc: KubeConfig, count: number): Promise<string[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const names = Array.from({ length: count }, (_, i) => `kwok-fake-${i}`);
  for (const name of names) {
    await core
      .createNode({
        body: {
          metadata: {
            name,
            annotations: { "kwok.x-k8s.io/node": "fake" },
            labels: { type: "kwok", "kubernetes.io/hostname": name },
          },
          status: {
            allocatable: { cpu: "32", memory: "256Gi", pods: "1000" },
            capacity: { cpu: "32", memory: "256Gi", pods: "1000" },
          },
        },
      })
      .catch((err: { code?: number }) => {
        if (err.code !== 409) throw err;
      });
  }
  await eventually(async () => {
    for (const name of names) {
      const node = await core.readNode({ name });
      const ready = node.status?.conditions?.find((c) => c.type === "Ready");
      if (ready?.status !== "True") throw new Error(`node ${name} not Ready yet`);
    }
  }, 30_000);
  return names;
}
