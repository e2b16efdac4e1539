import { createHash } from "node:crypto";

/**
 * Kernel object names for a pod's sandbox. Interface names are limited to 15
 * characters, so they carry a hash, not the pod's name. The namespace name
 * starts with a tag of the node, so an agent that restarts can find and
 * remove what an earlier run of the same node left behind without touching
 * the namespaces of another agent on the same machine.
 */
export const NETNS_PREFIX = "mgpod-";
const VETH_PREFIX = "mgv";

export interface SandboxNames {
  netns: string;
  /** The host end of the veth pair; the pod end is renamed eth0 inside the namespace. */
  hostVeth: string;
}

export function nodeTag(nodeName: string): string {
  return shortHash(nodeName, 6);
}

/** Prefix of every namespace this node's agent creates. */
export function netnsPrefixOf(nodeName: string): string {
  return `${NETNS_PREFIX}${nodeTag(nodeName)}-`;
}

export function sandboxNames(nodeName: string, podUid: string): SandboxNames {
  const podHash = shortHash(`${nodeName}/${podUid}`, 10);
  return { netns: `${netnsPrefixOf(nodeName)}${podHash}`, hostVeth: hostVethOf(podHash) };
}

/** The host veth of a namespace found on the machine (stale-sandbox cleanup). */
export function hostVethOfNetns(netns: string): string {
  return hostVethOf(netns.slice(netns.lastIndexOf("-") + 1));
}

function hostVethOf(podHash: string): string {
  return `${VETH_PREFIX}${podHash}`;
}

function shortHash(text: string, length: number): string {
  return createHash("sha256").update(text).digest("hex").slice(0, length);
}

/** A folder name for a pod's state that a human can recognise. */
export function podFolderName(namespace: string, name: string, uid: string): string {
  return `${namespace}_${name}_${uid.slice(0, 8)}`;
}
