import { isAbsolute, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { InferenceModel } from "../../crds/inference-model.js";

/**
 * Where `modelgate dev` finds a model's files. `file:///abs/path` is used in
 * place; `file:relative/path` (no slashes after the colon) is relative to the
 * YAML file's folder, so checked-in examples work from any checkout. Other
 * schemes are fetched into the state folder first.
 */
export type ModelLocation = { kind: "local"; path: string } | { kind: "fetch"; uri: string };

export function locateModel(model: InferenceModel, yamlDir: string): ModelLocation {
  const uri = model.spec.source.uri;
  if (uri.startsWith("file://")) return { kind: "local", path: fileURLToPath(uri) };
  if (uri.startsWith("file:")) {
    const path = uri.slice("file:".length);
    return { kind: "local", path: isAbsolute(path) ? path : resolve(yamlDir, path) };
  }
  return { kind: "fetch", uri };
}
