import { join } from "node:path";
import { parseArgs } from "node:util";
import { contains, formatIp, parseCidr } from "./cidr.js";

/** The command line of main.ts, parsed and defaulted. Pure. */
export const DEFAULT_NODE_NAME = "modelgate-real-0";
export const DEFAULT_POD_CIDR = "10.250.0.0/24";
export const DEFAULT_POD_RANGE = "10.250.0.0/16";

export interface CliOptions {
  kubeconfigPath?: string;
  nodeName: string;
  podCIDR: string;
  podRange: string;
  stateDir: string;
  logLevel?: string;
}

export const USAGE =
  "usage: main.ts --kubeconfig FILE [--node-name N] [--pod-cidr CIDR] [--pod-range CIDR] [--state-dir DIR] [--log-level L]";

export function parseCliOptions(argv: string[], repoRoot: string): CliOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      kubeconfig: { type: "string" },
      "node-name": { type: "string" },
      "pod-cidr": { type: "string" },
      "pod-range": { type: "string" },
      "state-dir": { type: "string" },
      "log-level": { type: "string" },
    },
    strict: true,
  });
  const nodeName = values["node-name"] ?? DEFAULT_NODE_NAME;
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(nodeName))
    throw new Error(`not a valid node name: ${nodeName}`);
  const podCIDR = values["pod-cidr"] ?? DEFAULT_POD_CIDR;
  const podRange = values["pod-range"] ?? DEFAULT_POD_RANGE;
  const cidr = parseCidr(podCIDR);
  const range = parseCidr(podRange);
  if (cidr.prefix < range.prefix || !contains(range, formatIp(cidr.base))) {
    throw new Error(`--pod-cidr ${podCIDR} is not inside --pod-range ${podRange}`);
  }
  return {
    ...(values.kubeconfig ? { kubeconfigPath: values.kubeconfig } : {}),
    nodeName,
    podCIDR,
    podRange,
    stateDir: values["state-dir"] ?? join(repoRoot, ".cache", "node-agent", nodeName),
    ...(values["log-level"] ? { logLevel: values["log-level"] } : {}),
  };
}
