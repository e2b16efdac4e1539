import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateLines } from "../../../gateway/batch/batch-validation.js";
import { createBatch } from "../../../gateway/batch/batch-store.js";
import { ChunkBuffer, FileWriter } from "../../../gateway/batch/file-store.js";
import { FileSource } from "../../../gateway/registry/file-source.js";
import { ModelRegistry } from "../../../gateway/registry/registry.js";
import { openStore } from "../../../gateway/store/store.js";
import { onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "../store/engines.js";
import { jsonlOf, type InputLine } from "./support.js";

const engines = useStoreEngines();
const owner = { account: "acme", project: null };

const registry = new ModelRegistry();
let source: FileSource | undefined;
beforeAll(async () => {
  const model = "tiny";
  const dir = await mkdtemp(join(tmpdir(), "models-"));
  await writeFile(
    join(dir, "m.yaml"),
    `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: ${model}\nspec:\n  task: text-generation\n  source: { uri: "hf://org/${model}" }\nstatus:\n  endpoint: http://127.0.0.1:9/${model}\n`,
  );
  source = new FileSource({ dir, registry, logger: pino({ level: "silent" }) });
  await source.start();
});
afterAll(() => source?.stop());

const line = (id: string): InputLine => ({
  custom_id: id,
  method: "POST",
  url: "/v1/responses",
  body: { model: "tiny", input: `request ${id}` },
});

describe.each(engines)("batch validation on $name", (engine) => {
  it("finds every repeated custom_id in the store, far apart or side by side, in line order", async () => {
    const store = await openStore(await engine.newTarget());
    onCleanup(() => store.close());
    // 1,300 lines: more than two INSERT_ROWS statements, so a duplicate may
    // be in the same statement as its original or in a later one.
    const lines: Array<InputLine | string> = Array.from({ length: 1300 }, (_, n) => line(`r${n}`));
    lines[1099] = line("r0"); // a statement after its original
    lines[700] = line("r699"); // the same statement
    lines[1200] = "{not json"; // an error of another kind, after them
    lines[1250] = line("r699"); // a third use
    const writer = await FileWriter.open(store.db, {
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
    const batch = await createBatch(store.db, {
      owner,
      keyId: "key-1",
      inputFileId: writer.id,
      endpoint: "/v1/responses",
      completionWindow: "24h",
      metadata: null,
      createdAt: new Date(),
      expiresAt: new Date(Date.now() + 86_400_000),
    });
    const result = await store.db
      .transaction()
      .execute((trx) => validateLines(trx, batch, registry));
    expect(result.total).toBe(1300);
    expect(result.errorCount).toBe(4);
    expect(result.errors.map((e) => [e.line, e.code, e.param])).toEqual([
      [701, "duplicate_custom_id", "custom_id"],
      [1100, "duplicate_custom_id", "custom_id"],
      [1201, "invalid_json_line", null],
      [1251, "duplicate_custom_id", "custom_id"],
    ]);
    expect(result.errors[1]!.message).toBe(
      "Line 1100: the custom_id 'r0' is used by an earlier line.",
    );
  });
});
