import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  CoreV1Api,
  type KubeConfig,
  type V1Container,
  type V1Deployment,
  type V1EnvVar,
  type V1Volume,
} from "@kubernetes/client-node";
import { stringify } from "yaml";
import type { TestCluster } from "../../support/cluster.js";
import { freePort } from "../../support/free-port.js";
import { startServiceProcess } from "../../support/service-process.js";

/**
 * A Deployment the chart installed, run as a local process the way its pod
 * would run: the container's args and env as rendered, its Secret volumes as
 * files in a temp folder (mount paths in args rewritten to that folder), and
 * the API server reached as the pod's own ServiceAccount, so that the chart's
 * RBAC is what the process gets. Only what a pod has and a loopback process
 * cannot is changed: the listen address and port.
 */
const run = promisify(execFile);

export interface ChartProcess {
  url: string;
  /** Health and metrics: the `--metrics-port` when the chart gives one, else the API port. */
  opsUrl: string;
  /** The argument list the process got, after the rewrites. */
  args: string[];
  logs: string[];
  stop(): Promise<void>;
}

/**
 * A kubeconfig with a TokenRequest token of the ServiceAccount and the test
 * cluster's server and CA: what the pod's mounted token would give it.
 */
export async function serviceAccountKubeconfig(
  cluster: TestCluster,
  namespace: string,
  serviceAccount: string,
  dir: string,
): Promise<string> {
  const { stdout } = await run(join(cluster.binDir, "kubectl"), [
    "--kubeconfig",
    cluster.kubeconfigPath,
    "create",
    "token",
    serviceAccount,
    "-n",
    namespace,
    "--duration=1h",
  ]);
  const server = cluster.kc.getCurrentCluster()!;
  const name = `${namespace}-${serviceAccount}`;
  const path = join(dir, `${serviceAccount}.kubeconfig`);
  await writeFile(
    path,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name,
          cluster: {
            server: server.server,
            ...(server.caFile ? { "certificate-authority": server.caFile } : {}),
            ...(server.caData ? { "certificate-authority-data": server.caData } : {}),
          },
        },
      ],
      users: [{ name, user: { token: stdout.trim() } }],
      contexts: [{ name, context: { cluster: name, user: name, namespace } }],
      "current-context": name,
    }),
    { mode: 0o600 },
  );
  return path;
}

export interface StartOptions {
  /** The admin client, for reading the Secrets the pod would have mounted. */
  kc: KubeConfig;
  deployment: V1Deployment;
  /** The ServiceAccount kubeconfig of serviceAccountKubeconfig(). */
  kubeconfigPath: string;
  /** Stands in for the pod's volumes. */
  dir: string;
  /** The pod name (metadata.name), e.g. the operator's leader identity. */
  podName: string;
}

export async function startFromDeployment(options: StartOptions): Promise<ChartProcess> {
  const { deployment, dir } = options;
  const namespace = deployment.metadata!.namespace!;
  const pod = deployment.spec!.template.spec!;
  const container = pod.containers[0]!;
  if (container.command?.join(" ") !== "modelgate") {
    throw new Error(`${deployment.metadata?.name}: expected command [modelgate]`);
  }
  const core = options.kc.makeApiClient(CoreV1Api);
  const mounts = await materializeVolumes(core, namespace, container, pod.volumes ?? [], dir);

  // Each port the chart gives a flag gets a free loopback port here, found
  // again by the container port's name when a probe names it.
  const ports = new Map<string, number>();
  const local = async (flag: string, chartPort: string) => {
    const port = await freePort();
    const named = container.ports?.find((p) => String(p.containerPort) === chartPort)?.name;
    if (named) ports.set(named, port);
    ports.set(flag, port);
    return port;
  };
  const args: string[] = [];
  for (const arg of container.args ?? []) {
    const flag = /^(--port|--metrics-port)=(\d+)$/.exec(arg);
    args.push(
      flag ? `${flag[1]}=${await local(flag[1]!, flag[2]!)}` : rewriteMountPaths(arg, mounts),
    );
  }
  args.push("--host=127.0.0.1", `--kubeconfig=${options.kubeconfigPath}`);
  const env = await containerEnv(core, namespace, container.env ?? [], options.podName);

  const port = ports.get("--port")!;
  const url = `http://127.0.0.1:${port}`;
  const probe = container.readinessProbe?.httpGet;
  const probePort = typeof probe?.port === "string" ? ports.get(probe.port) : probe?.port;
  const service = await startServiceProcess({
    args,
    // The container's own readiness probe path, on the port it names.
    readyUrl: `http://127.0.0.1:${probePort ?? port}${probe?.path ?? "/readyz"}`,
    // KUBECONFIG of the test's shell must not stand in for the ServiceAccount.
    baseEnv: withoutKubeconfig(process.env),
    env,
  });
  return {
    url,
    opsUrl: `http://127.0.0.1:${ports.get("--metrics-port") ?? port}`,
    args,
    logs: service.logs,
    async stop() {
      await service.stop();
    },
  };
}

/** mountPath → local folder, longest first so that nested mounts win. */
type Mounts = Array<[mountPath: string, folder: string]>;

async function materializeVolumes(
  core: CoreV1Api,
  namespace: string,
  container: V1Container,
  volumes: V1Volume[],
  dir: string,
): Promise<Mounts> {
  const mounts: Mounts = [];
  for (const mount of container.volumeMounts ?? []) {
    const volume = volumes.find((v) => v.name === mount.name);
    if (!volume) throw new Error(`volumeMount ${mount.name} has no volume`);
    const folder = join(dir, "volumes", volume.name);
    await mkdir(folder, { recursive: true });
    if (volume.secret) {
      const secret = await core.readNamespacedSecret({
        name: volume.secret.secretName!,
        namespace,
      });
      for (const [key, value] of Object.entries(secret.data ?? {})) {
        await writeFile(join(folder, key), Buffer.from(value, "base64"), { mode: 0o400 });
      }
    } else if (!volume.emptyDir && !volume.persistentVolumeClaim) {
      throw new Error(`volume ${volume.name}: only secret, emptyDir and PVC volumes are handled`);
    }
    mounts.push([mount.mountPath, folder]);
  }
  return mounts.sort((a, b) => b[0].length - a[0].length);
}

function rewriteMountPaths(arg: string, mounts: Mounts): string {
  for (const [mountPath, folder] of mounts) {
    const at = arg.indexOf(mountPath);
    const next = arg[at + mountPath.length];
    if (at >= 0 && (next === undefined || next === "/")) {
      return arg.slice(0, at) + folder + arg.slice(at + mountPath.length);
    }
  }
  return arg;
}

/** The container's env as the kubelet would resolve it; anything else fails loudly. */
async function containerEnv(
  core: CoreV1Api,
  namespace: string,
  vars: V1EnvVar[],
  podName: string,
): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const v of vars) {
    if (v.value !== undefined) env[v.name] = v.value;
    else if (v.valueFrom?.fieldRef?.fieldPath === "metadata.name") env[v.name] = podName;
    else if (v.valueFrom?.fieldRef?.fieldPath === "metadata.namespace") env[v.name] = namespace;
    else if (v.valueFrom?.secretKeyRef) {
      const ref = v.valueFrom.secretKeyRef;
      const secret = await core.readNamespacedSecret({ name: ref.name!, namespace });
      env[v.name] = Buffer.from(secret.data?.[ref.key] ?? "", "base64").toString("utf8");
    } else throw new Error(`env ${v.name}: unhandled source ${JSON.stringify(v.valueFrom)}`);
  }
  return env;
}

function withoutKubeconfig(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const copy = { ...env };
  delete copy.KUBECONFIG;
  return copy;
}
