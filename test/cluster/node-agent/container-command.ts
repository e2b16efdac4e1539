import { join } from "node:path";
import type { V1Container, V1Pod } from "@kubernetes/client-node";

/**
 * What a container becomes on this machine: the program, its arguments, the
 * working folder and the environment. Pure, so the mapping rules can be read
 * and tested in one place. There are no images: `modelgate` (the entrypoint
 * of our image) runs this checkout's CLI under tsx, anything else runs as
 * the host has it.
 */
export interface CommandContext {
  repoRoot: string;
  /** The Node.js binary that runs `modelgate` (the agent's own). */
  nodeBinary: string;
  /** PATH for the containers; the host's. */
  path: string;
  podIP: string | undefined;
  /** emptyDir volume name → its folder on the host. */
  volumeDirs: ReadonlyMap<string, string>;
  /** Where a container without a working directory runs. */
  defaultCwd: string;
}

export interface ResolvedCommand {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
}

export const MODELGATE_ENTRYPOINT = "modelgate";

export function resolveCommand(
  pod: V1Pod,
  container: V1Container,
  ctx: CommandContext,
): ResolvedCommand {
  const mounts = mountRewrites(container, ctx.volumeDirs);
  const rewrite = (value: string): string => rewritePaths(value, mounts);
  const env = containerEnv(pod, container, ctx, rewrite, mounts);
  const argv = [...(container.command ?? []), ...(container.args ?? [])].map((arg) =>
    rewrite(expandReferences(arg, env)),
  );
  if (argv.length === 0) {
    throw new Error(
      `container ${container.name} has no command: images are not supported, so the entrypoint must be in the spec`,
    );
  }
  if (argv[0] === MODELGATE_ENTRYPOINT) {
    return {
      file: ctx.nodeBinary,
      args: ["--import", "tsx", join(ctx.repoRoot, "cli", "modelgate.ts"), ...argv.slice(1)],
      // tsx is resolved from the working folder: the checkout's node_modules.
      cwd: ctx.repoRoot,
      env,
    };
  }
  return {
    file: argv[0]!,
    args: argv.slice(1),
    cwd: container.workingDir ? rewrite(container.workingDir) : ctx.defaultCwd,
    env,
  };
}

interface MountRewrite {
  mountPath: string;
  hostDir: string;
}

/** Longest mount path first, so /data/cache wins over /data. */
function mountRewrites(
  container: V1Container,
  volumeDirs: ReadonlyMap<string, string>,
): MountRewrite[] {
  const out: MountRewrite[] = [];
  for (const mount of container.volumeMounts ?? []) {
    const hostDir = volumeDirs.get(mount.name);
    if (hostDir === undefined) continue;
    const subPath = mount.subPath ? `/${mount.subPath}` : "";
    out.push({
      mountPath: mount.mountPath.replace(/\/+$/, "") || "/",
      hostDir: `${hostDir}${subPath}`,
    });
  }
  return out.sort((a, b) => b.mountPath.length - a.mountPath.length);
}

/**
 * Replaces a mount path where it starts a path inside a value: at the start,
 * after `=`, `:` or `,` (flag values, PATH-like lists), or after a space,
 * quote or redirection (shell scripts in `sh -c`), and only when the path
 * ends there or continues with `/`. `--dest=/models/x` becomes
 * `--dest=<folder>/x`, while `/modelsfoo` and `http://h/models` are left alone.
 */
export function rewritePaths(value: string, mounts: readonly MountRewrite[]): string {
  let out = value;
  for (const { mountPath, hostDir } of mounts) {
    if (mountPath === "/") continue;
    const escaped = mountPath.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const pattern = new RegExp(`(^|[=:,\\s'"<>])${escaped}(?=$|/|[:,;\\s'"])`, "g");
    out = out.replace(pattern, (_m, lead: string) => `${lead}${hostDir}`);
  }
  return out;
}

/**
 * A container's environment, built from scratch as a container runtime
 * does: the agent's own variables (KUBECONFIG, MODELGATE_*) must not leak
 * into the pod.
 */
function containerEnv(
  pod: V1Pod,
  container: V1Container,
  ctx: CommandContext,
  rewrite: (value: string) => string,
  mounts: readonly MountRewrite[],
): Record<string, string> {
  const env: Record<string, string> = {
    PATH: ctx.path,
    HOSTNAME: pod.metadata?.name ?? "",
    HOME: "/root",
  };
  const tmp = mounts.find((m) => m.mountPath === "/tmp");
  if (tmp) env.TMPDIR = tmp.hostDir;
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) {
      env[variable.name] = rewrite(expandReferences(variable.value, env));
      continue;
    }
    const fieldPath = variable.valueFrom?.fieldRef?.fieldPath;
    if (fieldPath !== undefined) {
      const value = fieldValue(pod, fieldPath, ctx.podIP);
      if (value !== undefined) env[variable.name] = value;
    }
    // Other sources (secrets, config maps, resources) are reported as
    // unsupported by unsupported.ts and left out here.
  }
  return env;
}

/** $(VAR) references to variables defined earlier, as the kubelet expands them; $$ escapes. */
function expandReferences(value: string, env: Record<string, string>): string {
  return value.replace(
    /\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g,
    (match, name: string | undefined) => {
      if (name === undefined) return "$";
      return env[name] ?? match;
    },
  );
}

export function fieldValue(
  pod: V1Pod,
  fieldPath: string,
  podIP: string | undefined,
): string | undefined {
  switch (fieldPath) {
    case "metadata.name":
      return pod.metadata?.name;
    case "metadata.namespace":
      return pod.metadata?.namespace;
    case "metadata.uid":
      return pod.metadata?.uid;
    case "spec.nodeName":
      return pod.spec?.nodeName;
    case "spec.serviceAccountName":
      return pod.spec?.serviceAccountName;
    case "status.podIP":
    case "status.podIPs":
      return podIP;
    default:
      return undefined;
  }
}

/** Supported field paths, for the unsupported-feature report. */
export const SUPPORTED_FIELD_PATHS = new Set([
  "metadata.name",
  "metadata.namespace",
  "metadata.uid",
  "spec.nodeName",
  "spec.serviceAccountName",
  "status.podIP",
  "status.podIPs",
]);
