import type { V1Container, V1Pod, V1Probe } from "@kubernetes/client-node";
import { SUPPORTED_FIELD_PATHS } from "./container-command.js";

/**
 * The parts of a pod spec this agent ignores, as human-readable lines, so
 * the agent can say once per pod what it will not do instead of silently
 * pretending. Pure; the agent logs the list.
 */
export function unsupportedFeatures(pod: V1Pod): string[] {
  const spec = pod.spec;
  if (!spec) return [];
  const out: string[] = [];
  if (spec.securityContext && Object.keys(spec.securityContext).length > 0) {
    out.push("pod securityContext (processes run as the agent's user)");
  }
  if (spec.hostNetwork) out.push("hostNetwork (the pod gets its own namespace anyway)");
  if (spec.readinessGates?.length)
    out.push("readinessGates (ignored: Ready follows the containers)");
  for (const volume of spec.volumes ?? []) {
    if (!volume.emptyDir) out.push(`volume ${volume.name}: only emptyDir is supported`);
  }
  const all: [string, V1Container][] = [
    ...(spec.initContainers ?? []).map((c): [string, V1Container] => ["init container", c]),
    ...(spec.containers ?? []).map((c): [string, V1Container] => ["container", c]),
  ];
  for (const [kind, c] of all) {
    const where = `${kind} ${c.name}`;
    if (c.image)
      out.push(`${where}: image ${c.image} is not pulled (the command runs on the host)`);
    if (c.securityContext && Object.keys(c.securityContext).length > 0) {
      out.push(`${where}: securityContext`);
    }
    if (c.resources?.limits || c.resources?.requests)
      out.push(`${where}: resource requests/limits are not enforced`);
    if (c.restartPolicy) out.push(`${where}: per-container restartPolicy (sidecars)`);
    if (c.lifecycle) out.push(`${where}: lifecycle hooks`);
    if (c.envFrom?.length) out.push(`${where}: envFrom`);
    for (const variable of c.env ?? []) {
      const from = variable.valueFrom;
      if (!from) continue;
      const path = from.fieldRef?.fieldPath;
      if (path === undefined || !SUPPORTED_FIELD_PATHS.has(path)) {
        out.push(`${where}: env ${variable.name} from ${path ?? Object.keys(from).join(",")}`);
      }
    }
    for (const [name, probe] of [
      ["startupProbe", c.startupProbe],
      ["livenessProbe", c.livenessProbe],
      ["readinessProbe", c.readinessProbe],
    ] as const) {
      if (probe && !isHttpProbe(probe))
        out.push(`${where}: ${name} is not httpGet (treated as always succeeding)`);
      if (probe?.httpGet?.scheme === "HTTPS")
        out.push(`${where}: ${name} over HTTPS (probed over HTTP)`);
    }
  }
  return out;
}

export function isHttpProbe(probe: V1Probe): boolean {
  return probe.httpGet !== undefined;
}
