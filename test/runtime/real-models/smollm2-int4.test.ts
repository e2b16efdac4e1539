import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResponsesRequest } from "../../../api/responses-request.js";
import { responsesResponseSchema } from "../../../api/responses-response.js";
import { validateRequest } from "../../../api/validation.js";
import type {
  GenerationOutcome,
  TextGenerator,
} from "../../../runtime/generation/text-generator.js";
import { requireSharedModel } from "../../support/shared-models.js";
import { startRuntime, type RunningRuntime } from "../support/runtime-server.js";
import { FRANCE, FRANCE_ANSWER, LENGTH_CASES } from "./prompts.js";
import type { ChatPrompt } from "./transformers-reference.js";

/**
 * SmolLM2-135M-Instruct in onnxruntime-genai's layout (4-bit MatMulNBits,
 * GroupQueryAttention), against the int8 Optimum build of the same weights,
 * whose ids the transformers.js tests (smollm2-generation.test.ts) hold equal
 * to the reference pipeline's. The two quantizations part ways on some
 * prompts from the first token (int8's dynamic activation scales against
 * 4-bit blocks), so ids are held equal where the builds agree (the model
 * card's France answer) and the common prefix is printed for the rest; the
 * prompt ids, usage and batching are exact on every prompt.
 */
const INT4 = "smollm2-135m-instruct-int4";
const INT8 = "smollm2-135m-instruct";
const int4 = requireSharedModel(INT4, "genai_config.json");
const int8 = requireSharedModel(INT8);
const MAX_NEW = 24;

function requestOf(model: string, prompt: ChatPrompt, maxOutputTokens: number): ResponsesRequest {
  const validation = validateRequest({
    model,
    input: prompt.input,
    instructions: prompt.instructions,
    temperature: 0,
    max_output_tokens: maxOutputTokens,
  });
  if (!validation.ok) throw new Error(validation.problem.message);
  return validation.request;
}

function generatorOf(runtime: RunningRuntime): TextGenerator {
  const model = runtime.service.model;
  if (model.task !== "text-generation") throw new Error(`loaded as ${model.task}`);
  return model.generator;
}

describe.skipIf(!int4.available || !int8.available)(
  "SmolLM2-135M-Instruct, onnxruntime-genai int4 build",
  () => {
    let runtime: RunningRuntime;
    let generator: TextGenerator;
    let reference: TextGenerator;
    let referenceRuntime: RunningRuntime;

    beforeAll(async () => {
      runtime = await startRuntime(
        { path: int4.path, modelId: INT4, threads: 2 },
        // These hold batching to exactness against the model run alone, with the
        // prefix cache on: a prompt asked again starts from its cached chunks, the same
        // computation as without them (prefill.ts; smollm2-prefix-cache.test.ts).
        { generationConcurrency: 8 },
      );
      referenceRuntime = await startRuntime(
        { path: int8.path, modelId: INT8, threads: 2 },
        { prefixCacheBytes: 0 },
      );
      generator = generatorOf(runtime);
      reference = generatorOf(referenceRuntime);
    });
    afterAll(async () => {
      await runtime?.close();
      await referenceRuntime?.close();
    });

    it("is served in its own layout: aligned cache shared by past and present, no position_ids", () => {
      expect(generator.io).toMatchObject({
        layout: "aligned",
        shareBuffer: true,
        positionIds: null,
        kvHeads: 3,
        headDim: 64,
      });
      expect(generator.io.cache).toHaveLength(60);
    });

    it("answers the capital of France with the int8 build's ids, over HTTP", async () => {
      const expected = await reference.run(
        reference.prepare(requestOf(INT8, FRANCE, MAX_NEW)),
        () => 0.5,
      );
      const ours = await generator.run(
        generator.prepare(requestOf(INT4, FRANCE, MAX_NEW)),
        () => 0.5,
      );
      expect(ours.ids).toEqual(expected.ids);
      const body = responsesResponseSchema.parse(
        await (await runtime.post(requestOf(INT4, FRANCE, MAX_NEW))).json(),
      );
      expect(body.output[0]?.content[0]?.text).toBe(FRANCE_ANSWER);
      expect(body.status).toBe("completed");
      expect(body.usage?.output_tokens).toBe(expected.ids.length);
    });

    it.each(LENGTH_CASES)(
      "tokenizes the $name prompt as the int8 build does and counts usage exactly",
      async ({ name, prompt }) => {
        const prepared = generator.prepare(requestOf(INT4, prompt, MAX_NEW));
        const theirs = reference.prepare(requestOf(INT8, prompt, MAX_NEW));
        expect(prepared.promptIds).toEqual(theirs.promptIds);
        const ours = await generator.run(prepared, () => 0.5);
        const int8Ids = (await reference.run(theirs, () => 0.5)).ids;
        let common = 0;
        while (common < ours.ids.length && ours.ids[common] === int8Ids[common]) common++;
        console.log(
          `SmolLM2 int4 vs int8, ${name} prompt (${prepared.promptIds.length} tokens): ` +
            `${common} of ${Math.min(ours.ids.length, int8Ids.length)} greedy ids in common`,
        );

        const response = await runtime.post(requestOf(INT4, prompt, MAX_NEW));
        expect(response.status).toBe(200);
        const body = responsesResponseSchema.parse(await response.json());
        expect(body.usage?.input_tokens).toBe(prepared.promptIds.length);
        expect(body.usage?.output_tokens).toBe(ours.ids.length);
        expect(response.headers.get("x-modelgate-output-tokens")).toBe(String(ours.ids.length));
        expect(body.output[0]?.content[0]?.text).toBe(ours.text);
      },
    );

    it("decodes concurrent requests of different lengths exactly as each decodes alone", async () => {
      const prompts = LENGTH_CASES.map((c) => c.prompt);
      const alone: GenerationOutcome[] = [];
      for (const prompt of prompts) {
        alone.push(
          await generator.run(generator.prepare(requestOf(INT4, prompt, MAX_NEW)), () => 0.5),
        );
      }
      const bodies = await Promise.all(
        prompts.map(async (prompt) =>
          responsesResponseSchema.parse(
            await (await runtime.post(requestOf(INT4, prompt, MAX_NEW))).json(),
          ),
        ),
      );
      bodies.forEach((body, i) => {
        expect(body.output[0]?.content[0]?.text).toBe(alone[i]!.text);
        expect(body.usage?.output_tokens).toBe(alone[i]!.ids.length);
      });
    });
  },
);
