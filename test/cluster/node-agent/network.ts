import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { hostVethOfNetns } from "./names.js";

/**
 * The pods' network, made with iproute2. Each pod gets a namespace with
 * loopback and eth0, one end of a veth pair whose host end carries the
 * node's gateway address as a /32 (the same address on every host end, as
 * Calico does), and a /32 route to the pod's address through it. Pods reach
 * the host through the gateway and nothing else: there is no forwarding
 * between pods and no way out of the machine.
 */
const execFileAsync = promisify(execFile);

async function ip(...args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync("ip", args, { encoding: "utf8" });
    return stdout;
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new Error(`ip ${args.join(" ")}: ${stderr || (err as Error).message}`);
  }
}

/** Never throws: for teardown steps whose object may already be gone. */
async function ipQuiet(...args: string[]): Promise<void> {
  await ip(...args).catch(() => undefined);
}

/**
 * Makes every address of the test pod range fail on this machine unless a
 * more specific pod route exists, so a test that talks to a pod that is not
 * here gets an error instead of sending packets off the host. Idempotent.
 */
export async function ensureUnreachableRoute(range: string): Promise<void> {
  await ip("route", "replace", "unreachable", range);
}

export interface SandboxSpec {
  netns: string;
  hostVeth: string;
  podIP: string;
  gateway: string;
}

export async function createSandbox(spec: SandboxSpec): Promise<void> {
  const { netns, hostVeth, podIP, gateway } = spec;
  // A leftover of a crashed run with the same names would make `add` fail.
  await destroySandbox(spec);
  await ip("netns", "add", netns);
  try {
    await ip("link", "add", hostVeth, "type", "veth", "peer", "name", "eth0", "netns", netns);
    await ip("addr", "replace", `${gateway}/32`, "dev", hostVeth);
    await ip("link", "set", hostVeth, "up");
    await ip("-n", netns, "link", "set", "lo", "up");
    await ip("-n", netns, "addr", "add", `${podIP}/32`, "dev", "eth0");
    await ip("-n", netns, "link", "set", "eth0", "up");
    await ip("-n", netns, "route", "add", gateway, "dev", "eth0", "scope", "link");
    await ip("-n", netns, "route", "add", "default", "via", gateway, "dev", "eth0");
    // src: the host answers and probes from the gateway, an address the pod can route back to.
    await ip("route", "replace", `${podIP}/32`, "dev", hostVeth, "src", gateway);
  } catch (err) {
    await destroySandbox(spec);
    throw err;
  }
}

/**
 * Removes the route, the veth pair (deleting one end deletes both) and the
 * namespace. Processes still inside are killed first: a namespace with
 * members does not go away. Never throws.
 */
export async function destroySandbox(
  spec: Pick<SandboxSpec, "netns" | "hostVeth"> & { podIP?: string },
): Promise<void> {
  await killNetnsMembers(spec.netns);
  if (spec.podIP !== undefined)
    await ipQuiet("route", "del", `${spec.podIP}/32`, "dev", spec.hostVeth);
  await ipQuiet("link", "del", spec.hostVeth);
  await ipQuiet("netns", "del", spec.netns);
}

async function killNetnsMembers(netns: string): Promise<void> {
  const out = await ip("netns", "pids", netns).catch(() => "");
  for (const pid of out.split(/\s+/).filter(Boolean).map(Number)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Exited meanwhile.
    }
  }
}

export async function listNetns(prefix: string): Promise<string[]> {
  const out = await ip("netns", "list").catch(() => "");
  return out
    .split("\n")
    .map((line) => line.split(" ")[0] ?? "")
    .filter((name) => name.startsWith(prefix));
}

/** Removes every sandbox an earlier run of this node's agent left behind. */
export async function removeStaleSandboxes(prefix: string): Promise<string[]> {
  const stale = await listNetns(prefix);
  for (const netns of stale) await destroySandbox({ netns, hostVeth: hostVethOfNetns(netns) });
  return stale;
}
