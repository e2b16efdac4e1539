import { execFile } from "node:child_process";
import { cp, mkdtemp, writeFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { readDecoderIO } from "../../runtime/generation/decoder-io.js";
import { loadModel } from "../../runtime/model/load-model.js";
import { fixtureFolder } from "./support/runtime-server.js";

const run = promisify(execFile);

async function copyOf(name: string): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), `${name}-`));
  await cp(await fixtureFolder(name), folder, { recursive: true });
  return folder;
}

describe("model folders that cannot be served fail at start-up with the reason", () => {
  it("names every missing file", async () => {
    const folder = await copyOf("tiny-gpt");
    await rm(join(folder, "tokenizer.json"));
    await rm(join(folder, "onnx"), { recursive: true });
    await expect(loadModel({ path: folder, overflow: "truncate", threads: 1 })).rejects.toThrow(
      /is missing tokenizer\.json, an ONNX graph \(onnx\/model\.onnx/,
    );
  });

  it("says when the folder does not exist", async () => {
    await expect(
      loadModel({ path: "/nonexistent/model", overflow: "truncate", threads: 1 }),
    ).rejects.toThrow("model folder /nonexistent/model does not exist");
  });

  it("refuses a graph that is not ONNX", async () => {
    const folder = await copyOf("tiny-gpt");
    await writeFile(join(folder, "onnx", "model.onnx"), "not a protobuf");
    await expect(loadModel({ path: folder, overflow: "truncate", threads: 1 })).rejects.toThrow(
      /onnxruntime cannot load the graph/,
    );
  });

  it("refuses an encoder served as a text-generation model", async () => {
    await expect(
      loadModel({
        path: await fixtureFolder("tiny-nli"),
        task: "text-generation",
        overflow: "truncate",
        threads: 1,
      }),
    ).rejects.toThrow(/unsupported decoder inputs token_type_ids/);
  });

  it("refuses a decoder served as an NLI classifier", async () => {
    await expect(
      loadModel({
        path: await fixtureFolder("tiny-gpt"),
        task: "zero-shot-classification",
        overflow: "truncate",
        threads: 1,
      }),
    ).rejects.toThrow(/not an NLI classifier/);
  });

  it("clamps maxTokens to the model's context and says so", async () => {
    const model = await loadModel({
      path: await fixtureFolder("tiny-gpt"),
      maxTokens: 100000,
      overflow: "truncate",
      threads: 1,
    });
    expect(model.notes.join()).toMatch(/above the model's context of 512/);
    await model.session.release();
  });

  it("the serve command exits non-zero with the reason", async () => {
    const result = await run(process.execPath, [
      "--import",
      "tsx",
      "cli/modelgate.ts",
      "runtime",
      "serve",
      "--model-path",
      "/nonexistent/model",
      "--port",
      "0",
      "--host",
      "127.0.0.1",
    ]).then(
      () => ({ code: 0, out: "" }),
      (error: { code: number; stdout: string; stderr: string }) => ({
        code: error.code,
        out: error.stdout + error.stderr,
      }),
    );
    expect(result.code).toBe(1);
    expect(result.out).toContain("model folder /nonexistent/model does not exist");
  });

  it("the serve command refuses a bad setting by name", async () => {
    const result = await run(process.execPath, [
      "--import",
      "tsx",
      "cli/modelgate.ts",
      "runtime",
      "serve",
      "--model-path",
      "/m",
      "--max-tokens",
      "lots",
    ]).then(
      () => ({ code: 0, out: "" }),
      (error: { code: number; stderr: string }) => ({ code: error.code, out: error.stderr }),
    );
    expect(result.code).toBe(1);
    expect(result.out).toMatch(
      /invalid setting maxTokens \(--max-tokens \/ MODELGATE_MAX_TOKENS\)/,
    );
  });
});

describe("decoder inputs and cache shapes come from the graph and config.json", () => {
  const tensor = (name: string, shape: Array<number | string>, type = "float32") => ({
    name,
    type,
    shape,
  });

  it("takes grouped key/value heads from num_key_value_heads when the graph's dims are symbolic", () => {
    const inputs = [
      tensor("input_ids", ["b", "s"], "int64"),
      tensor("attention_mask", ["b", "t"], "int64"),
      tensor("position_ids", ["b", "s"], "int64"),
      tensor("past_key_values.0.key", ["b", "h", "p", "d"]),
      tensor("past_key_values.0.value", ["b", "h", "p", "d"]),
    ];
    const outputs = [
      tensor("logits", ["b", "s", "v"]),
      tensor("present.0.key", []),
      tensor("present.0.value", []),
    ];
    const config = {
      num_attention_heads: 9,
      num_key_value_heads: 3,
      hidden_size: 576,
      vocab_size: 100,
    };
    const io = readDecoderIO(inputs, outputs, { config, path: "m" });
    expect(io).toMatchObject({
      kvHeads: 3,
      headDim: 64,
      positionIds: "position_ids",
      vocabSize: 100,
    });
    expect(io.cache).toEqual([
      { pastName: "past_key_values.0.key", presentName: "present.0.key" },
      { pastName: "past_key_values.0.value", presentName: "present.0.value" },
    ]);
  });

  it("prefers fixed dims of the graph over config.json", () => {
    const inputs = [
      tensor("input_ids", ["b", "s"], "int64"),
      tensor("past_key_values.0.key", ["b", 2, "p", 16]),
    ];
    const outputs = [tensor("logits", ["b", "s", 50]), tensor("present.0.key", [])];
    const io = readDecoderIO(inputs, outputs, { config: { n_head: 8, n_embd: 64 }, path: "m" });
    expect(io).toMatchObject({
      kvHeads: 2,
      headDim: 16,
      vocabSize: 50,
      attentionMask: null,
      positionIds: null,
    });
  });

  it("refuses a cache input without its present output", () => {
    const inputs = [
      tensor("input_ids", ["b", "s"], "int64"),
      tensor("past_key_values.0.key", ["b", 2, "p", 16]),
    ];
    expect(() => readDecoderIO(inputs, [tensor("logits", [])], { config: {}, path: "m" })).toThrow(
      /no matching output 'present.0.key'/,
    );
  });
});
