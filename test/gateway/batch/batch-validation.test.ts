import { describe, expect, it } from "vitest";
import { validateLines } from "../../../gateway/batch/batch-validation.js";
import { openStore } from "../../../gateway/store/store.js";
import { onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "../store/engines.js";
import { storedBatch, useTinyModel } from "./stored-batch.js";
import type { InputLine } from "./support.js";

const engines = useStoreEngines();
const owner = { account: "acme", project: null };

const registry = useTinyModel();

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
    const batch = await storedBatch(store.db, owner, lines);
    const result = await store.db
      .transaction()
      .execute((trx) => validateLines(trx, batch, registry, 1024 * 1024));
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

describe.each(engines)("batch validation limits on $name", (engine) => {
  it("refuses a line whose body the synchronous route would refuse as too large, and only that line", async () => {
    const store = await openStore(await engine.newTarget());
    onCleanup(() => store.close());
    const limit = 4096;
    const sized = (id: string, bytes: number): InputLine => {
      const body = { model: "tiny", input: "", store: false };
      const overhead = Buffer.byteLength(JSON.stringify(body));
      return { ...line(id), body: { model: "tiny", input: "x".repeat(bytes - overhead) } };
    };
    const batch = await storedBatch(store.db, owner, [
      sized("at-limit", limit),
      sized("over", limit + 1),
      line("small"),
    ]);
    const result = await store.db
      .transaction()
      .execute((trx) => validateLines(trx, batch, registry, limit));
    expect(result.errors).toEqual([
      {
        code: "request_too_large",
        message: `Line 2: the request body is ${limit + 1} bytes, over the limit of ${limit} bytes.`,
        param: "body",
        line: 2,
      },
    ]);
  });

  it("lists the first 1,000 line errors and says how many more were left out", async () => {
    const store = await openStore(await engine.newTarget());
    onCleanup(() => store.close());
    const lines = Array.from({ length: 1003 }, () => "{not json");
    const batch = await storedBatch(store.db, owner, lines);
    const result = await store.db
      .transaction()
      .execute((trx) => validateLines(trx, batch, registry, 1024 * 1024));
    expect(result.errorCount).toBe(1003);
    expect(result.errors).toHaveLength(1001);
    expect(result.errors[999]!.line).toBe(1000);
    expect(result.errors[1000]).toEqual({
      code: "too_many_errors",
      message: "3 more lines have problems; only the first 1000 are listed.",
      param: null,
      line: null,
    });
  });
});
