import { execFile, execFileSync } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import type { KubernetesObject, V1Deployment, V1PolicyRule } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../support/cluster.js";

/**
 * Helpers for the chart tests: the cached helm binary of test/cluster/, and
 * `helm template` parsed into objects so that tests assert on fields, not on
 * text snapshots.
 */
export const CHART_DIR = join(REPO_ROOT, "charts", "modelgate");
export const CI_VALUES = (name: string): string => join(CHART_DIR, "ci", `${name}-values.yaml`);

const run = promisify(execFile);
let binDir: string | undefined;

/** The folder with helm and kubectl: build.sh builds once, then answers in well under a second. */
export function toolsDir(): string {
  binDir ??= execFileSync(join(REPO_ROOT, "test", "cluster", "build.sh"), {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  })
    .trim()
    .split("\n")
    .pop()!;
  return binDir;
}

export const helmPath = (): string => join(toolsDir(), "helm");
export const kubectlPath = (): string => join(toolsDir(), "kubectl");

export interface RenderOptions {
  /** Value files, applied in order. */
  files?: string[];
  /** `--set` pairs. */
  set?: Record<string, string | number | boolean>;
  release?: string;
  namespace?: string;
}

function templateArgs(opts: RenderOptions): string[] {
  const args = [
    "template",
    opts.release ?? "mg",
    CHART_DIR,
    "--namespace",
    opts.namespace ?? "modelgate-system",
  ];
  for (const file of opts.files ?? []) args.push("--values", file);
  for (const [key, value] of Object.entries(opts.set ?? {})) args.push("--set", `${key}=${value}`);
  return args;
}

/** `helm template` as YAML text. */
export async function renderText(opts: RenderOptions = {}): Promise<string> {
  const { stdout } = await run(helmPath(), templateArgs(opts), { maxBuffer: 16 << 20 });
  return stdout;
}

/** `helm template` parsed: one object per rendered document. */
export async function render(opts: RenderOptions = {}): Promise<KubernetesObject[]> {
  const docs = parseAllDocuments(await renderText(opts));
  return docs
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(doc.errors.map((e) => e.message).join("\n"));
      return doc.toJS() as KubernetesObject | null;
    })
    .filter((obj): obj is KubernetesObject => obj !== null);
}

/** The error text of a `helm template` that must fail. */
export async function renderError(opts: RenderOptions): Promise<string> {
  try {
    await run(helmPath(), templateArgs(opts), { maxBuffer: 16 << 20 });
  } catch (err) {
    return (err as { stderr: string }).stderr;
  }
  throw new Error(`helm template succeeded with ${JSON.stringify(opts)}`);
}

/** The one object of a kind whose name ends with `suffix`. */
export function one<T extends KubernetesObject = KubernetesObject>(
  objects: KubernetesObject[],
  kind: string,
  suffix = "",
): T {
  const found = objects.filter((o) => o.kind === kind && o.metadata?.name?.endsWith(suffix));
  if (found.length !== 1) {
    throw new Error(`expected one ${kind} named *${suffix}, found ${found.length}`);
  }
  return found[0] as T;
}

export function kinds(objects: KubernetesObject[]): string[] {
  return objects.map((o) => `${o.kind}/${o.metadata?.name}`).sort();
}

export function container(deployment: V1Deployment) {
  const c = deployment.spec?.template.spec?.containers[0];
  if (!c) throw new Error(`${deployment.metadata?.name} has no container`);
  return c;
}

/** Rules as sorted "group/resource[names]: verbs" lines, so that two rule lists compare exactly. */
export function ruleLines(rules: V1PolicyRule[] | undefined): string[] {
  const lines: string[] = [];
  for (const rule of rules ?? []) {
    for (const group of rule.apiGroups ?? []) {
      for (const resource of rule.resources ?? []) {
        const names = rule.resourceNames ? `[${[...rule.resourceNames].sort().join(",")}]` : "";
        lines.push(`${group || "core"}/${resource}${names}: ${[...rule.verbs].sort().join(",")}`);
      }
    }
  }
  return lines.sort();
}
