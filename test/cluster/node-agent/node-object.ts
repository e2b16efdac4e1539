import { arch, cpus, hostname, release, totalmem } from "node:os";
import type { V1Node, V1NodeCondition, V1NodeStatus, V1Taint } from "@kubernetes/client-node";

/**
 * The Node this agent registers and the status it reports. Pure apart from
 * reading the machine's size. The taint keeps every other workload (kwok
 * scale tests, benchmarks) off the node: only a pod that tolerates it and
 * selects the label lands here.
 */
export const NODE_AGENT_LABEL = "modelgate.dev/node-agent";
export const NODE_AGENT_TAINT: V1Taint = {
  key: NODE_AGENT_LABEL,
  value: "true",
  effect: "NoSchedule",
};
export const AGENT_VERSION = "modelgate-node-agent";

export interface NodeIdentity {
  name: string;
  podCIDR: string;
  /** The node's address: the pods' gateway. */
  address: string;
}

export function buildNode(identity: NodeIdentity): V1Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: identity.name,
      labels: {
        "kubernetes.io/hostname": identity.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": goArch(),
        [NODE_AGENT_LABEL]: "true",
      },
    },
    spec: { podCIDR: identity.podCIDR, podCIDRs: [identity.podCIDR], taints: [NODE_AGENT_TAINT] },
  };
}

export function buildNodeStatus(
  identity: NodeIdentity,
  ready: boolean,
  message: string,
  now: Date,
  since: Date,
): V1NodeStatus {
  const resources = {
    cpu: String(cpus().length),
    memory: `${Math.floor(totalmem() / 1024)}Ki`,
    pods: "110",
  };
  const condition = (
    type: string,
    status: boolean,
    reason: string,
    text: string,
  ): V1NodeCondition => ({
    type,
    status: status ? "True" : "False",
    reason,
    message: text,
    lastHeartbeatTime: now,
    lastTransitionTime: since,
  });
  return {
    capacity: resources,
    allocatable: resources,
    conditions: [
      condition(
        "MemoryPressure",
        false,
        "KubeletHasSufficientMemory",
        "not measured by the node agent",
      ),
      condition(
        "DiskPressure",
        false,
        "KubeletHasNoDiskPressure",
        "not measured by the node agent",
      ),
      condition("PIDPressure", false, "KubeletHasSufficientPID", "not measured by the node agent"),
      condition("Ready", ready, ready ? "KubeletReady" : "NodeAgentStopped", message),
    ],
    addresses: [
      { type: "InternalIP", address: identity.address },
      { type: "Hostname", address: identity.name },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
    nodeInfo: {
      machineID: "",
      systemUUID: "",
      bootID: "",
      kernelVersion: release(),
      osImage: `host ${hostname()}`,
      containerRuntimeVersion: `${AGENT_VERSION}://processes`,
      kubeletVersion: AGENT_VERSION,
      kubeProxyVersion: "",
      operatingSystem: "linux",
      architecture: goArch(),
    },
  };
}

/** Node's arch names in Go's spelling, as the kubernetes.io/arch label uses them. */
function goArch(): string {
  const names: Record<string, string> = { x64: "amd64", arm64: "arm64", ia32: "386" };
  return names[arch()] ?? arch();
}
