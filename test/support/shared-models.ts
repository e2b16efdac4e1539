import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The real pretrained models live outside the repository (they are too big
 * to commit), in `<repo>/../shared/models` unless MODELGATE_SHARED_MODELS
 * points elsewhere. Tests that need them skip on a developer machine without
 * them, but in CI a missing model is a failure: a silently skipped
 * comparison against the reference would hide a broken runtime.
 */
export const SHARED_MODELS_ENV = "MODELGATE_SHARED_MODELS";

/** The ONNX file inside a model folder that tests load. */
export const SHARED_ONNX_FILE = "onnx/model_quantized.onnx";

const REPO_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

/** The folder that holds the shared models, whether or not it exists. */
export function sharedModelsDir(): string {
  const fromEnv = process.env[SHARED_MODELS_ENV];
  if (fromEnv !== undefined && fromEnv !== "") return resolve(fromEnv);
  return resolve(REPO_ROOT, "..", "shared", "models");
}

/**
 * The model's folder when it is there with its ONNX file (`file`: another
 * file that marks the folder complete, such as an onnxruntime-genai build's
 * `genai_config.json`), else null.
 */
export function sharedModel(name: string, file = SHARED_ONNX_FILE): string | null {
  const folder = join(sharedModelsDir(), name);
  return existsSync(join(folder, file)) ? folder : null;
}

export interface SharedModel {
  /** The folder the model is (or was looked for) in. */
  path: string;
  /** The folder's parent, as transformers.js wants it for `env.localModelPath`. */
  dir: string;
  available: boolean;
}

/**
 * For a test file's top level: use with `describe.skipIf(!model.available)`.
 * Throws during collection when the model is missing in CI.
 */
export function requireSharedModel(name: string, file = SHARED_ONNX_FILE): SharedModel {
  const dir = sharedModelsDir();
  const path = join(dir, name);
  if (sharedModel(name, file) !== null) return { path, dir, available: true };
  const looked = join(path, file);
  if (process.env.CI === "true") {
    throw new Error(
      `shared model ${name} is missing: no ${looked}. CI must have the real models; set ${SHARED_MODELS_ENV} to the folder that holds them.`,
    );
  }
  process.stderr.write(
    `skipping tests on shared model ${name}: no ${looked} (set ${SHARED_MODELS_ENV} to the folder holding the models)\n`,
  );
  return { path, dir, available: false };
}
