// `npm run bench:operator [-- --quick]`: the operator against the test
// cluster's kwok nodes. Applies many InferenceModels at once and reports the
// time until all are Ready, the operator's peak memory, and the time from a
// spec change to the changed Deployment. Needs `npm run build` (the operator
// runs from dist/, as in the image) and starts or reuses the test cluster.
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  AppsV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesObject,
  type V1Deployment,
} from "@kubernetes/client-node";
import { API_VERSION, inferenceModelSchema, KIND, PLURAL } from "../../../crds/inference-model.js";
import { desiredChildren } from "../../../operator/controller/desired.js";
import { getText } from "../../../lib/kube/raw-list.js";
import { startWatchedCache } from "../../../lib/kube/watched-cache.js";
import {
  createTestNamespace,
  ensureFakeNodes,
  REPO_ROOT,
  serverSideApply,
  testCluster,
} from "../../support/cluster.js";
import { startOperatorProcess } from "../../support/operator-process.js";
import { statCpuSeconds } from "../support/proc-stat.js";
import { startRun } from "../support/run-clock.js";

const quick = process.argv.includes("--quick");
const MODELS = quick ? 100 : 500;
const CHANGES = quick ? 30 : 200;
const APPLY_CONCURRENCY = 32;
const TARGET_READY_S = 30;
const TARGET_P99_MS = 1000;
const TARGET_MEMORY_MB = 200;

/** What startOperatorProcess passes to the operator, for the cluster-alone children. */
const BENCH_BUILD = { image: "modelgate:test", imagePullPolicy: "IfNotPresent" } as const;

type Model = KubernetesObject & { status?: { conditions?: { type: string; status: string }[] } };

const { log, elapsedSeconds } = startRun(quick ? 5 * 60_000 : 15 * 60_000);

async function main(): Promise<void> {
  const entry = join(REPO_ROOT, "dist", "cli", "modelgate.js");
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\` first`);
  log(
    `modelgate operator benchmark (${quick ? "quick" : "full"}): ${MODELS} models, ${CHANGES} spec changes, node ${process.version}`,
  );
  const { kc, kubeconfigPath } = await testCluster();
  await ensureFakeNodes(kc, 10);
  const { namespace, remove } = await createTestNamespace(kc, "bench-operator");
  log(`cluster ready; namespace ${namespace}; 10 kwok nodes`);

  const operator = await startOperatorProcess({
    kubeconfigPath,
    namespace,
    identity: "bench",
    entry: "dist",
    logLevel: "info",
  });
  const pid = operator.child.pid!;
  log(
    `operator started from dist/ (pid ${pid}), idle RSS ${(await memory(pid)).rss.toFixed(0)} MiB`,
  );

  // Watch from the benchmark's side: when each model turned Ready, and each
  // Deployment's pod template as it changes.
  const readyAt = new Map<string, number>();
  const models = startWatchedCache<Model>({
    kc,
    path: `/apis/${API_VERSION}/namespaces/${namespace}/${PLURAL}`,
    list: () => KubernetesObjectApi.makeApiClient(kc).list<Model>(API_VERSION, KIND, namespace),
    onChange: (m) => {
      const ready = m.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
      const name = m.metadata!.name!;
      if (ready && !readyAt.has(name)) readyAt.set(name, performance.now());
    },
  });
  const templateSeen = new Map<string, { maxTokens: string | undefined; at: number }>();
  // Where the time to Ready goes: the operator creating the Deployment, the
  // cluster's controllers and kwok making it available, the operator
  // noticing and writing Ready.
  const deploymentCreatedAt = new Map<string, number>();
  const deploymentAvailableAt = new Map<string, number>();
  const apps = kc.makeApiClient(AppsV1Api);
  const deployments = startWatchedCache<V1Deployment>({
    kc,
    path: `/apis/apps/v1/namespaces/${namespace}/deployments`,
    list: () => apps.listNamespacedDeployment({ namespace }),
    onChange: (d) => {
      const args = d.spec?.template.spec?.containers[0]?.args ?? [];
      const maxTokens = args.find((a) => a.startsWith("--max-tokens="));
      const name = d.metadata!.name!;
      const now = performance.now();
      templateSeen.set(name, { maxTokens, at: now });
      if (!deploymentCreatedAt.has(name)) deploymentCreatedAt.set(name, now);
      if ((d.status?.availableReplicas ?? 0) > 0 && !deploymentAvailableAt.has(name)) {
        deploymentAvailableAt.set(name, now);
      }
    },
  });
  await Promise.all([models.synced, deployments.synced]);

  const names = Array.from({ length: MODELS }, (_, i) => `bench-${String(i).padStart(4, "0")}`);
  const spec = (maxTokens: number) => ({
    task: "zero-shot-classification",
    source: { uri: "hf://org/bench-model@main" },
    maxTokens,
  });
  const object = (name: string, maxTokens: number) => ({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, namespace },
    spec: spec(maxTokens),
  });

  // Phase 1: everything at once.
  const cpuBefore = await controlPlaneCpu();
  const benchCpuBefore = process.cpuUsage();
  const apiBefore = await apiWrites(kc);
  const t0 = performance.now();
  await pool(names, APPLY_CONCURRENCY, (name) => serverSideApply(kc, object(name, 1024)));
  const appliedS = (performance.now() - t0) / 1000;
  log(`applied ${MODELS} InferenceModels in ${appliedS.toFixed(2)} s`);
  let peakDuringApply = 0;
  while (readyAt.size < MODELS) {
    peakDuringApply = Math.max(peakDuringApply, (await memory(pid)).rss);
    if ((performance.now() - t0) / 1000 > 180)
      throw new Error(`only ${readyAt.size} of ${MODELS} Ready after 180 s`);
    await sleep(100);
    if (Math.round(elapsedSeconds() * 10) % 50 === 0) log(`  ${readyAt.size}/${MODELS} Ready`);
  }
  const allReadyS = (Math.max(...readyAt.values()) - t0) / 1000;
  const readyTimes = [...readyAt.values()].map((t) => (t - t0) / 1000).sort((a, b) => a - b);
  log(
    `all ${MODELS} Ready ${allReadyS.toFixed(2)} s after the first apply (median model ${percentile(readyTimes, 50).toFixed(2)} s)`,
  );

  const phase = (times: Iterable<number>) => {
    const sorted = [...times].map((t) => (t - t0) / 1000).sort((a, b) => a - b);
    return `median ${percentile(sorted, 50).toFixed(1)} s, last ${sorted.at(-1)!.toFixed(1)} s`;
  };
  log(`  operator CPU so far: ${(await statCpuSeconds(`/proc/${pid}/stat`)).toFixed(1)} s`);
  // Who used the 2 cores meanwhile: the control plane's processes, the
  // operator, and this benchmark's own watches.
  const cpuAfter = await controlPlaneCpu();
  const benchCpu = process.cpuUsage(benchCpuBefore);
  const shares = [...cpuAfter].map(
    ([name, s]) => `${name} ${(s - (cpuBefore.get(name) ?? 0)).toFixed(1)}`,
  );
  shares.push(`operator ${(await statCpuSeconds(`/proc/${pid}/stat`)).toFixed(1)}`);
  shares.push(`benchmark ${((benchCpu.user + benchCpu.system) / 1e6).toFixed(1)}`);
  log(
    `  CPU seconds until all Ready (${(2 * allReadyS).toFixed(0)} available on 2 cores): ${shares.join(", ")}`,
  );
  // Who loads the API server: every write it served meanwhile, and the
  // operator's own (applies, deletes, status writes; events come on top).
  const apiAfter = await apiWrites(kc);
  const operatorMetrics = await (await fetch(`http://127.0.0.1:${operator.port}/metrics`)).text();
  const operatorWrites = sumMetric(operatorMetrics, "modelgate_operator_writes_total");
  const reconciles = sumMetric(
    operatorMetrics,
    "modelgate_operator_reconcile_duration_seconds_count",
  );
  const reconcileSeconds = sumMetric(
    operatorMetrics,
    "modelgate_operator_reconcile_duration_seconds_sum",
  );
  log(
    `  operator reconciles: ${reconciles}, mean ${((1000 * reconcileSeconds) / reconciles).toFixed(0)} ms each`,
  );
  const writes = writesBetween(apiBefore, apiAfter);
  log(
    `  API server writes meanwhile: ${writes.total}, of which the operator's applies and status writes ${operatorWrites} (${((100 * operatorWrites) / writes.total).toFixed(0)}%)`,
  );
  log(`  by kind: ${writes.top}`);
  log(`  Deployments created: ${phase(deploymentCreatedAt.values())}`);
  log(`  Deployments available: ${phase(deploymentAvailableAt.values())}`);
  log(`  models Ready: ${phase(readyAt.values())}`);

  // Phase 2: spec changes one at a time, each timed until the Deployment
  // the benchmark watches carries the new template.
  const latencies: number[] = [];
  for (let i = 0; i < CHANGES; i++) {
    const name = names[i % names.length]!;
    const maxTokens = 2048 + i;
    const want = `--max-tokens=${maxTokens}`;
    const start = performance.now();
    await serverSideApply(kc, object(name, maxTokens));
    for (;;) {
      const seen = templateSeen.get(`${name}-runtime`);
      if (seen?.maxTokens === want) {
        latencies.push(seen.at - start);
        break;
      }
      if (performance.now() - start > 30_000)
        throw new Error(`${name}: no changed Deployment after 30 s`);
      await sleep(2);
    }
  }
  latencies.sort((a, b) => a - b);
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  log(
    `spec change → changed Deployment over ${CHANGES} changes: p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, max ${latencies.at(-1)!.toFixed(0)} ms`,
  );

  const mem = await memory(pid);
  const peak = Math.max(mem.peak, peakDuringApply);
  log(`operator memory: RSS now ${mem.rss.toFixed(0)} MiB, peak (VmHWM) ${peak.toFixed(0)} MiB`);

  await models.stop();
  await deployments.stop();
  await operator.stop();
  await remove();

  // The reference: the same children, applied by this process with no
  // operator at all, so the cluster's own share of the time shows.
  const floorS = await clusterAlone(kc, names);
  const floorRatio = allReadyS / floorS;
  log(
    `the cluster alone: ${MODELS} Deployments and Services applied directly, all available ${floorS.toFixed(2)} s after the first apply; the operator's all Ready is ${floorRatio.toFixed(2)}× that`,
  );

  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  log("== summary");
  log(
    `all ${MODELS} Ready: ${allReadyS.toFixed(2)} s (target < ${TARGET_READY_S} s) ${verdict(allReadyS < TARGET_READY_S)}`,
  );
  log(
    `spec change p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms (target p99 < ${TARGET_P99_MS} ms) ${verdict(p99 < TARGET_P99_MS)}`,
  );
  log(
    `operator peak memory ${peak.toFixed(0)} MiB (target < ${TARGET_MEMORY_MB} MB) ${verdict(peak < TARGET_MEMORY_MB)}`,
  );
  log(
    `reference: the cluster alone makes the same ${MODELS} Deployments available in ${floorS.toFixed(2)} s (operator ${floorRatio.toFixed(2)}× that)`,
  );
}

/**
 * Applies the children the operator would build for each model (its own
 * pure builders, without owner references) straight from this process, at
 * the same concurrency, and returns the seconds until every Deployment has
 * an available replica. Runs after the operator's namespace is gone, so
 * that namespace's deletion does not load this phase.
 */
async function clusterAlone(kc: KubeConfig, names: readonly string[]): Promise<number> {
  const core = kc.makeApiClient(CoreV1Api);
  await waitNamespacesGone(core);
  const { namespace, remove } = await createTestNamespace(kc, "bench-floor");
  const apps = kc.makeApiClient(AppsV1Api);
  const availableAt = new Map<string, number>();
  const deployments = startWatchedCache<V1Deployment>({
    kc,
    path: `/apis/apps/v1/namespaces/${namespace}/deployments`,
    list: () => apps.listNamespacedDeployment({ namespace }),
    onChange: (d) => {
      const name = d.metadata!.name!;
      if ((d.status?.availableReplicas ?? 0) > 0 && !availableAt.has(name)) {
        availableAt.set(name, performance.now());
      }
    },
  });
  await deployments.synced;
  const children = names.map((name) => {
    const model = inferenceModelSchema.parse({
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, namespace, uid: "00000000-0000-0000-0000-000000000000", generation: 1 },
      spec: {
        task: "zero-shot-classification",
        source: { uri: "hf://org/bench-model@main" },
        maxTokens: 1024,
      },
    });
    return desiredChildren(model, BENCH_BUILD).apply.map((child) => {
      delete child.metadata!.ownerReferences;
      return child;
    });
  });
  log(`cluster alone: applying ${names.length} Deployments and Services in ${namespace}`);
  const t0 = performance.now();
  await pool(children, APPLY_CONCURRENCY, (objects) =>
    Promise.all(objects.map((o) => serverSideApply(kc, o))),
  );
  while (availableAt.size < names.length) {
    if ((performance.now() - t0) / 1000 > 180)
      throw new Error(
        `cluster alone: only ${availableAt.size} of ${names.length} available after 180 s`,
      );
    await sleep(100);
  }
  const seconds = (Math.max(...availableAt.values()) - t0) / 1000;
  await deployments.stop();
  await remove();
  return seconds;
}

/** Waits (at most 3 minutes) until no benchmark namespace is left terminating. */
async function waitNamespacesGone(core: CoreV1Api): Promise<void> {
  const started = performance.now();
  for (;;) {
    const list = await core.listNamespace();
    const left = list.items.filter((n) => n.metadata!.name!.startsWith("bench-"));
    if (left.length === 0) return;
    if (performance.now() - started > 180_000) {
      throw new Error(
        `namespaces still terminating: ${left.map((n) => n.metadata!.name).join(", ")}`,
      );
    }
    if (Math.round((performance.now() - started) / 100) % 50 === 0) {
      log(`  waiting for ${left.map((n) => n.metadata!.name).join(", ")} to be deleted`);
    }
    await sleep(200);
  }
}

async function memory(pid: number): Promise<{ rss: number; peak: number }> {
  const text = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) =>
    Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

/**
 * Mutating requests the API server has served (its own
 * apiserver_request_total), by "verb resource[/subresource]".
 */
async function apiWrites(kc: KubeConfig): Promise<Map<string, number>> {
  const text = await getText(kc, "/metrics");
  const byKind = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const verb = /verb="(POST|PUT|PATCH|APPLY|DELETE)"/.exec(line)?.[1];
    if (!verb) continue;
    const resource = /[{,]resource="([^"]*)"/.exec(line)?.[1] ?? "?";
    const sub = /subresource="([^"]+)"/.exec(line)?.[1];
    const key = `${verb} ${resource}${sub ? `/${sub}` : ""}`;
    byKind.set(key, (byKind.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return byKind;
}

/** after − before per kind, largest first, and the total. */
function writesBetween(
  before: Map<string, number>,
  after: Map<string, number>,
): { total: number; top: string } {
  const diffs = [...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)] as const);
  const nonzero = diffs.filter(([, d]) => d > 0).sort((a, b) => b[1] - a[1]);
  const total = nonzero.reduce((sum, [, d]) => sum + d, 0);
  return { total, top: nonzero.map(([k, d]) => `${k} ${d}`).join(", ") };
}

function sumMetric(text: string, name: string): number {
  return text
    .split("\n")
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

const CONTROL_PLANE = [
  "kube-apiserver",
  "etcd",
  "kube-controller",
  "kube-scheduler",
  "kwok-controller",
];

/** CPU seconds so far of the test cluster's processes, found by name in /proc. */
async function controlPlaneCpu(): Promise<Map<string, number>> {
  const seconds = new Map<string, number>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const comm = await readFile(`/proc/${entry}/comm`, "utf8").catch(() => "");
    const name = comm.trim();
    if (!CONTROL_PLANE.includes(name)) continue;
    const s = await statCpuSeconds(`/proc/${entry}/stat`);
    // One that ended between the listing and the read counts nothing.
    seconds.set(name, (seconds.get(name) ?? 0) + (Number.isNaN(s) ? 0 : s));
  }
  return seconds;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}

async function pool<T>(
  items: readonly T[],
  size: number,
  work: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: size }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    log(`benchmark failed: ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  },
);
