import { HTTP_PORT } from "../../crds/child-names.js";
import { modelIdOf, type InferenceModel } from "../../crds/inference-model.js";

/**
 * What the two containers of a model's pod run, as argument lists of the one
 * `modelgate` binary. Everything goes in flags, none in MODELGATE_* variables:
 * the fetch command only has flags, flags win over variables in the runtime
 * (so a stray variable in the image cannot override the spec), and
 * `kubectl describe pod` then shows the whole configuration on one line.
 *
 * Each flag and its value are one argument, `--flag=value`: a value that
 * starts with a dash (a negative similarity midpoint) is then never read as
 * the next flag, by commander or by `util.parseArgs`.
 */
export const MODELS_DIR = "/models";

type Tuning = NonNullable<InferenceModel["spec"]["runtime"]>;

/**
 * spec.runtime field → `modelgate runtime serve` flag. The mapped type makes
 * a field added to the schema fail to compile here until it is passed on;
 * the test checks every flag against the runtime's own settings schema.
 */
export const TUNING_FLAGS: { readonly [K in keyof Required<Tuning>]: string } = {
  threads: "--threads",
  maxBatchSize: "--max-batch-size",
  batchWindowMs: "--batch-window-ms",
  generationConcurrency: "--generation-concurrency",
  maxQueue: "--max-queue",
  prefixCacheBytes: "--prefix-cache-bytes",
  zeroShotMethod: "--zero-shot-method",
  hypothesisTemplate: "--hypothesis-template",
  similarityMidpoint: "--similarity-midpoint",
  similaritySteepness: "--similarity-steepness",
};

/** Where the init container puts the model and the runtime reads it. */
export function modelPath(model: Pick<InferenceModel, "metadata">): string {
  return `${MODELS_DIR}/${model.metadata.name}`;
}

/**
 * `runtime fetch` into `/models/<name>`: a folder under the volume's mount
 * point, not the mount point itself, because fetch stages into
 * `<dest>.partial` and renames, which needs both on one filesystem.
 * Checksums are sorted by path so the pod template (and its hash) does not
 * depend on the order keys were written in.
 */
export function fetchArgs(model: Pick<InferenceModel, "metadata" | "spec">): string[] {
  const { source } = model.spec;
  const args = ["runtime", "fetch", flag("--source", source.uri), flag("--dest", modelPath(model))];
  if (source.revision !== undefined) args.push(flag("--revision", source.revision));
  const checksums = Object.entries(source.checksums ?? {}).sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  );
  for (const [path, hex] of checksums) args.push(flag("--sha256", `${path}=${hex}`));
  return args;
}

/**
 * `runtime serve`. Tuning fields left unset are not passed, so the runtime's
 * own defaults apply; in particular `--threads` is absent unless the spec
 * sets it, and the runtime sizes its thread pool from the cgroup CPU limit.
 * The port is passed even though 8080 is the runtime's default, so that the
 * container port, the probes and the process cannot disagree.
 */
export function serveArgs(model: Pick<InferenceModel, "metadata" | "spec">): string[] {
  const { spec } = model;
  const args = [
    "runtime",
    "serve",
    flag("--model-path", modelPath(model)),
    flag("--model-id", modelIdOf(model)),
    flag("--task", spec.task),
    flag("--overflow", spec.overflow),
  ];
  if (spec.maxTokens !== undefined) args.push(flag("--max-tokens", spec.maxTokens));
  const tuning = spec.runtime ?? {};
  for (const key of Object.keys(TUNING_FLAGS) as (keyof Tuning)[]) {
    const value = tuning[key];
    if (value !== undefined) args.push(flag(TUNING_FLAGS[key], value));
  }
  args.push(flag("--port", HTTP_PORT));
  return args;
}

function flag(name: string, value: string | number): string {
  return `${name}=${value}`;
}
