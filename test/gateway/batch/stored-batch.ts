import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kysely } from "kysely";
import { pino } from "pino";
import { afterAll, beforeAll } from "vitest";
import { createBatch } from "../../../gateway/batch/batch-store.js";
import { ChunkBuffer, FileWriter } from "../../../gateway/batch/file-store.js";
import { FileSource } from "../../../gateway/registry/file-source.js";
import { ModelRegistry } from "../../../gateway/registry/registry.js";
import type { Database } from "../../../gateway/store/database.js";
import { jsonlOf, type InputLine } from "./support.js";

/** Store-level batch tests: the model their lines name, and a batch over an uploaded file. */

/** A registry holding the text-generation model "tiny", loaded before the file's tests. */
export function useTinyModel(): ModelRegistry {
  const registry = new ModelRegistry();
  let source: FileSource | undefined;
  beforeAll(async () => {
    const dir = await mkdtemp(join(tmpdir(), "models-"));
    await writeFile(
      join(dir, "m.yaml"),
      `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: tiny\nspec:\n  task: text-generation\n  source: { uri: "hf://org/tiny" }\nstatus:\n  endpoint: http://127.0.0.1:9/tiny\n`,
    );
    source = new FileSource({ dir, registry, logger: pino({ level: "silent" }) });
    await source.start();
  });
  afterAll(() => source?.stop());
  return registry;
}

/** `lines` uploaded as an `owner`'s batch file, and a new batch over it (key-1, 24 h). */
export async function storedBatch(
  db: Kysely<Database>,
  owner: { account: string; project: string | null },
  lines: readonly (InputLine | string)[],
) {
  const writer = await FileWriter.open(db, {
    owner,
    purpose: "batch",
    filename: "in.jsonl",
    createdAt: new Date(),
    expiresAt: null,
  });
  const buffer = new ChunkBuffer(writer);
  await buffer.push(jsonlOf(lines));
  await buffer.flush();
  await writer.finish(lines.length);
  return createBatch(db, {
    owner,
    keyId: "key-1",
    inputFileId: writer.id,
    endpoint: "/v1/responses",
    completionWindow: "24h",
    metadata: null,
    createdAt: new Date(),
    expiresAt: new Date(Date.now() + 86_400_000),
    outputExpiresAfterSeconds: null,
  });
}
