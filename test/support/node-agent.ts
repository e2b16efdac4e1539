import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { createWriteStream, mkdirSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, type V1Node, type V1Toleration } from "@kubernetes/client-node";
import { DEFAULT_NODE_NAME, DEFAULT_POD_CIDR } from "../cluster/node-agent/options.js";
import { NODE_AGENT_LABEL, NODE_AGENT_TAINT } from "../cluster/node-agent/node-object.js";
import { eventually, REPO_ROOT } from "./cluster.js";

/**
 * Runs the node agent of test/cluster/node-agent/ as a child process for a
 * test: pods scheduled with schedulingFor() land on its node and run for
 * real, in network namespaces with addresses of the test pod range.
 */
export interface NodeAgentOptions {
  kubeconfigPath: string;
  /** Default modelgate-real-0. Agents running at once need different names. */
  nodeName?: string;
  /** Default 10.250.0.0/24 for the default node, else a /24 derived from the name. */
  podCIDR?: string;
}

export interface NodeAgent {
  nodeName: string;
  podCIDR: string;
  /** The agent's log (JSON lines), for a failing test's post-mortem. */
  logFile: string;
  /** What a pod needs to be scheduled onto this node, and only onto it. */
  schedulingFor(): { nodeSelector: Record<string, string>; tolerations: V1Toleration[] };
  /** SIGTERM; resolves once the agent has stopped its pods, cleaned up and exited. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 60_000;

export async function startNodeAgent(options: NodeAgentOptions): Promise<NodeAgent> {
  const nodeName = options.nodeName ?? DEFAULT_NODE_NAME;
  const podCIDR = options.podCIDR ?? podCIDRFor(nodeName);
  const stateDir = join(REPO_ROOT, ".cache", "node-agent", nodeName);
  mkdirSync(stateDir, { recursive: true });
  const logFile = join(stateDir, "agent.log");
  const log = createWriteStream(logFile, { flags: "a" });
  // node --import tsx, not the tsx CLI: the CLI runs the script in a second
  // process, and a SIGTERM to the first would not reach the agent.
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      join(REPO_ROOT, "test", "cluster", "node-agent", "main.ts"),
      "--kubeconfig",
      options.kubeconfigPath,
      "--node-name",
      nodeName,
      "--pod-cidr",
      podCIDR,
      "--state-dir",
      stateDir,
    ],
    { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  let exitCode: number | null | undefined;
  void exited.then((code) => (exitCode = code));

  const kc = new KubeConfig();
  kc.loadFromFile(options.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const startedAt = Date.now();
  try {
    await eventually(
      async () => {
        if (exitCode !== undefined)
          throw new Error(`node agent exited with ${exitCode}; see ${logFile}`);
        assertSchedulable(await core.readNode({ name: nodeName }), startedAt);
      },
      READY_TIMEOUT_MS,
      200,
    );
  } catch (err) {
    await stopChild(child, exited);
    log.end();
    throw err;
  }

  return {
    nodeName,
    podCIDR,
    logFile,
    schedulingFor: () => ({
      nodeSelector: { [NODE_AGENT_LABEL]: "true", "kubernetes.io/hostname": nodeName },
      tolerations: [
        {
          key: NODE_AGENT_TAINT.key,
          operator: "Equal",
          value: NODE_AGENT_TAINT.value!,
          effect: NODE_AGENT_TAINT.effect,
        },
      ],
    }),
    async stop() {
      await stopChild(child, exited);
      log.end();
    },
  };
}

/**
 * Ready by this agent's own heartbeat (a node left Ready by an agent that
 * was killed does not count), and without the not-ready taint the node
 * controller put on while it was down, which would keep pods Pending.
 */
function assertSchedulable(node: V1Node, startedAt: number): void {
  const ready = node.status?.conditions?.find((c) => c.type === "Ready");
  if (ready?.status !== "True") throw new Error(`node ${node.metadata?.name} is not Ready`);
  const beat = ready.lastHeartbeatTime ? new Date(ready.lastHeartbeatTime).getTime() : 0;
  // Heartbeat times have whole seconds.
  if (beat < startedAt - 1000) throw new Error("Ready comes from an earlier agent");
  const blocking = (node.spec?.taints ?? []).filter((t) => t.key.startsWith("node.kubernetes.io/"));
  if (blocking.length > 0)
    throw new Error(`node still has ${blocking.map((t) => t.key).join(", ")}`);
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/**
 * Agents that run at the same time need disjoint pod ranges: the default
 * node keeps 10.250.0.0/24, any other name gets 10.250.N.0/24 from a hash
 * of its name (N from 1 to 254).
 */
export function podCIDRFor(nodeName: string): string {
  if (nodeName === DEFAULT_NODE_NAME) return DEFAULT_POD_CIDR;
  const n = 1 + (createHash("sha256").update(nodeName).digest().readUInt32BE(0) % 254);
  return `10.250.${n}.0/24`;
}
