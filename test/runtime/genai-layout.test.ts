import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responsesResponseSchema } from "../../api/responses-response.js";
import { validateRequest } from "../../api/validation.js";
import type { TextGenerator } from "../../runtime/generation/text-generator.js";
import { loadModel } from "../../runtime/model/load-model.js";
import { loadFixtureTokenizer } from "../fixtures/fixture-tokenizer.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

/**
 * The onnxruntime-genai layout, on tiny-genai (float32, GroupQueryAttention,
 * no position_ids, chat template in chat_template.jinja, weights in
 * model.onnx.data): served as it is, and decoded in batches whose every
 * sequence gets exactly the ids it gets alone.
 */
const MODEL = "tiny-genai";

function request(input: string, maxTokens: number) {
  const validation = validateRequest({
    model: MODEL,
    input,
    temperature: 0,
    max_output_tokens: maxTokens,
  });
  if (!validation.ok) throw new Error(validation.problem.message);
  return validation.request;
}

function generatorOf(runtime: RunningRuntime): TextGenerator {
  const model = runtime.service.model;
  if (model.task !== "text-generation") throw new Error(`${MODEL} loaded as ${model.task}`);
  return model.generator;
}

/** Decode steps and the rows they carried, from the runtime's batch-size histogram. */
async function steps(runtime: RunningRuntime): Promise<{ count: number; rows: number }> {
  const metric = await runtime.metrics.batchSize.get();
  const count = metric.values.find((v) => v.metricName?.endsWith("_count"))?.value ?? 0;
  const rows = metric.values.find((v) => v.metricName?.endsWith("_sum"))?.value ?? 0;
  return { count, rows };
}

const temporaries: string[] = [];
afterAll(async () => {
  await Promise.all(temporaries.map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A copy of a fixture folder under a misleading name. */
async function copyAs(fixture: string, name: string): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "modelgate-layout-"));
  temporaries.push(root);
  const folder = join(root, name);
  await cp(await fixtureFolder(fixture), folder, { recursive: true });
  return folder;
}

describe("the onnxruntime-genai layout", () => {
  it("is read from the folder's files, never from its name", async () => {
    const genai = await loadModel({
      path: await copyAs("tiny-genai", "tiny-gpt-optimum"),
      overflow: "truncate",
      threads: 1,
    });
    const optimum = await loadModel({
      path: await copyAs("tiny-gpt", "tiny-genai-int4"),
      overflow: "truncate",
      threads: 1,
    });
    try {
      if (genai.task !== "text-generation" || optimum.task !== "text-generation") {
        throw new Error("both folders hold decoders");
      }
      expect(genai.generator.io).toMatchObject({
        layout: "aligned",
        shareBuffer: true,
        positionIds: null,
        kvHeads: 2,
        headDim: 16,
      });
      expect(genai.generator.io.cache).toHaveLength(4);
      expect(optimum.generator.io).toMatchObject({ layout: "padded", positionIds: "position_ids" });
    } finally {
      await genai.session.release();
      await optimum.session.release();
    }
  });

  describe("served", () => {
    let runtime: RunningRuntime;
    let generator: TextGenerator;

    beforeAll(async () => {
      runtime = await startRuntime(
        { path: await fixtureFolder(MODEL), modelId: MODEL },
        { generationConcurrency: 8 },
      );
      generator = generatorOf(runtime);
    });
    afterAll(async () => runtime?.close());

    it("renders the chat template from chat_template.jinja and counts usage exactly", async () => {
      const tokenizer = loadFixtureTokenizer(await fixtureFolder(MODEL));
      const prepared = generator.prepare(request("Tell me about the harbour", 6));
      const chat = "<|im_start|>user\nTell me about the harbour<|im_end|>\n<|im_start|>assistant\n";
      expect(prepared.promptIds).toEqual(tokenizer.encode(chat).ids);

      const alone = await generator.run(prepared, () => 0.5);
      const response = await runtime.post(request("Tell me about the harbour", 6));
      expect(response.status).toBe(200);
      expect(response.headers.get("x-modelgate-input-tokens")).toBe(
        String(prepared.promptIds.length),
      );
      const body = responsesResponseSchema.parse(await response.json());
      expect(body.usage?.input_tokens).toBe(prepared.promptIds.length);
      expect(body.usage?.output_tokens).toBe(alone.ids.length);
      expect(body.output[0]?.content[0]?.text).toBe(alone.text);
    });

    it("decodes staggered concurrent requests exactly as each decodes alone", async () => {
      const cases = [
        ["A long story about ships, harbours and the open sea at night", 150],
        ["Hi", 5],
        ["Tell me about the weather", 9],
        ["x", 40],
        ["The quick brown fox jumps over the lazy dog", 3],
        ["Another one joins the batch late", 11],
        ["And one more, later still", 27],
      ] as const;
      // Alone: one sequence through the single-sequence loop (a growing cache,
      // no shared buffer), the path batching must not change.
      const alone = await Promise.all(
        cases.map(([input, n]) => generator.run(generator.prepare(request(input, n)), () => 0.5)),
      );
      expect(alone[0]!.ids.length).toBeGreaterThan(100);

      const before = await steps(runtime);
      const post = async (input: string, n: number) =>
        responsesResponseSchema.parse(await (await runtime.post(request(input, n))).json());
      const first = cases.slice(0, 5).map(([input, n]) => post(input, n));
      // Late joiners arrive once the batch has decoded a few steps.
      while ((await steps(runtime)).count - before.count < 8)
        await new Promise((resolve) => setImmediate(resolve));
      const late = cases.slice(5).map(([input, n]) => post(input, n));
      const bodies = await Promise.all([...first, ...late]);
      const after = await steps(runtime);

      bodies.forEach((body, i) => {
        expect(body.output[0]?.content[0]?.text, cases[i]![0]).toBe(alone[i]!.text);
        expect(body.usage?.output_tokens, cases[i]![0]).toBe(alone[i]!.ids.length);
      });
      // The sequences really shared steps: more rows than steps.
      expect(after.rows - before.rows).toBeGreaterThan(after.count - before.count);
    });
  });

  it("admits a sequence only while the cache budget holds its prompt plus its output limit", async () => {
    // Each request reserves its prompt (~20 tokens) plus 40 new ones, padded
    // to 64 positions: a budget of 128 positions holds two at a time.
    const runtime = await startRuntime(
      { path: await fixtureFolder(MODEL), modelId: MODEL },
      { generationConcurrency: 8, kvCacheTokens: 128 },
    );
    try {
      const inputs = ["one two three", "four five six", "seven eight", "nine ten", "eleven"];
      const prompts = inputs.map((input) => generatorOf(runtime).prepare(request(input, 40)));
      for (const p of prompts) expect(p.promptIds.length + 40 + 1).toBeLessThanOrEqual(64);
      const bodies = await Promise.all(
        inputs.map(async (input) =>
          responsesResponseSchema.parse(await (await runtime.post(request(input, 40))).json()),
        ),
      );
      for (const body of bodies) expect(body.status).not.toBe("failed");
      const metric = await runtime.metrics.batchSize.get();
      const bucket = (le: number) =>
        metric.values.find((v) => v.metricName?.endsWith("_bucket") && v.labels.le === le)?.value;
      const total = metric.values.find((v) => v.metricName?.endsWith("_count"))?.value ?? 0;
      expect(total).toBeGreaterThan(0);
      // Every step carried at most two sequences, and some carried two.
      expect(bucket(2)).toBe(total);
      expect(bucket(1)).toBeLessThan(total);
    } finally {
      await runtime.close();
    }
  });
});
