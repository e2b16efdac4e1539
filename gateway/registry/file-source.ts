import { watch, type FSWatcher } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { inferenceModelSchema, type InferenceModel } from "../../crds/inference-model.js";
import type { Logger } from "../../lib/logger.js";
import { routableModel, type ModelRegistry } from "./registry.js";

/**
 * The registry's local source: a folder of InferenceModel YAML, validated by
 * the CRD's own schema and reloaded when a file changes. A bad document is
 * reported with its file and field and skipped; the others keep serving.
 */
export interface FileSourceOptions {
  dir: string;
  registry: ModelRegistry;
  logger: Logger;
  /**
   * Ready endpoints of a model. Default: the object's `status.endpoint`;
   * `modelgate dev` supplies the runtimes it started.
   */
  endpointsOf?: (model: InferenceModel) => readonly string[];
}

export interface LoadProblem {
  file: string;
  message: string;
}

export interface LoadResult {
  models: InferenceModel[];
  problems: LoadProblem[];
}

/** Reads and validates every InferenceModel document in the folder. */
export async function readModelFolder(dir: string): Promise<LoadResult> {
  const files = (await readdir(dir)).filter((f) => /\.ya?ml$/.test(f)).sort();
  const models: InferenceModel[] = [];
  const problems: LoadProblem[] = [];
  for (const file of files) {
    const text = await readFile(join(dir, file), "utf8");
    parseAllDocuments(text).forEach((doc, index) => {
      const where = `${file}#${index + 1}`;
      if (doc.errors.length > 0) {
        problems.push({ file: where, message: `invalid YAML: ${doc.errors[0]!.message}` });
        return;
      }
      const value: unknown = doc.toJS();
      if (value === null || value === undefined) return;
      const parsed = inferenceModelSchema.safeParse(value);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        problems.push({
          file: where,
          message: `${issue.path.join(".") || "(document)"}: ${issue.message}`,
        });
        return;
      }
      models.push(parsed.data);
    });
  }
  return { models, problems };
}

export class FileSource {
  private watcher: FSWatcher | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly options: FileSourceOptions) {}

  async load(): Promise<LoadResult> {
    const result = await readModelFolder(this.options.dir);
    for (const problem of result.problems) {
      this.options.logger.error(
        { file: problem.file },
        `skipping InferenceModel: ${problem.message}`,
      );
    }
    const endpointsOf =
      this.options.endpointsOf ??
      ((m: InferenceModel) => (m.status?.endpoint ? [m.status.endpoint] : []));
    this.options.registry.replaceAll(result.models.map((m) => routableModel(m, endpointsOf(m))));
    return result;
  }

  /** Loads now, then again shortly after any change in the folder. */
  async start(): Promise<LoadResult> {
    const result = await this.load();
    this.watcher = watch(this.options.dir, () => {
      // Editors write in several steps; reload once they are done.
      if (this.timer) clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        this.load().catch((error: unknown) =>
          this.options.logger.error({ err: error }, "cannot reload the model folder"),
        );
      }, 100);
      this.timer.unref();
    });
    return result;
  }

  stop(): void {
    this.watcher?.close();
    if (this.timer) clearTimeout(this.timer);
  }
}
