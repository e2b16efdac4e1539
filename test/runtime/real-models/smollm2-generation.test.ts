import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResponsesRequest } from "../../../api/responses-request.js";
import {
  responsesResponseSchema,
  type ResponsesResponse,
} from "../../../api/responses-response.js";
import { validateRequest } from "../../../api/validation.js";
import type { TextGenerator } from "../../../runtime/generation/text-generator.js";
import { requireSharedModel } from "../../support/shared-models.js";
import { startRuntime, type RunningRuntime } from "../support/runtime-server.js";
import {
  FRANCE,
  FRANCE_ANSWER,
  GARDEN_TEXT,
  HARBOUR_TEXT,
  LENGTH_CASES,
  type LengthCase,
} from "./prompts.js";
import {
  ReferenceGenerator,
  type ChatPrompt,
  type ReferenceGreedy,
} from "./transformers-reference.js";

const MODEL_ID = "smollm2-135m-instruct";
const smol = requireSharedModel(MODEL_ID);

/** New tokens per comparison: enough to diverge if logits differ, few enough for 2 cores. */
const MAX_NEW = 24;
/** A prefill chunk no prompt here reaches: each prompt in one run, as the reference does. */
const WHOLE_PROMPT = 8192;

function requestOf(prompt: ChatPrompt, maxOutputTokens: number): ResponsesRequest {
  const validation = validateRequest({
    model: MODEL_ID,
    input: prompt.input,
    instructions: prompt.instructions,
    temperature: 0,
    max_output_tokens: maxOutputTokens,
  });
  if (!validation.ok) throw new Error(validation.problem.message);
  return validation.request;
}

async function parsed(response: Response): Promise<ResponsesResponse> {
  return responsesResponseSchema.parse(await response.json());
}

function outputText(body: ResponsesResponse): string {
  return body.output[0]?.content[0]?.text ?? "";
}

function generatorOf(runtime: RunningRuntime): TextGenerator {
  const model = runtime.service.model;
  if (model.task !== "text-generation") throw new Error(`${MODEL_ID} loaded as ${model.task}`);
  return model.generator;
}

describe.skipIf(!smol.available)(
  "SmolLM2-135M-Instruct: our runtime against transformers.js",
  () => {
    let reference: ReferenceGenerator;
    let runtime: RunningRuntime;
    let generator: TextGenerator;
    // Each reference decode costs seconds on 2 cores: compute it once per prompt.
    const greedyCache = new Map<ChatPrompt, Promise<ReferenceGreedy>>();
    const referenceGreedy = (prompt: ChatPrompt): Promise<ReferenceGreedy> => {
      let cached = greedyCache.get(prompt);
      if (!cached) {
        cached = reference.greedy(prompt, MAX_NEW);
        greedyCache.set(prompt, cached);
      }
      return cached;
    };

    beforeAll(async () => {
      reference = await ReferenceGenerator.load(smol.dir, MODEL_ID);
      // Compared with a pipeline that prefills a prompt in one run: int8's dynamic
      // activation scales are taken over everything a run feeds, so the runtime's
      // default prefill in chunks of 64 tokens (prefill.ts, for an exact prefix
      // cache) gives other scales on longer prompts, and ids may part, as batching
      // does (see the models' README). Here it prefills whole prompts too.
      runtime = await startRuntime(
        { path: smol.path, modelId: MODEL_ID, threads: 2 },
        { prefixCacheBytes: 0, prefillChunkTokens: WHOLE_PROMPT },
      );
      generator = generatorOf(runtime);
    });
    afterAll(async () => {
      await runtime?.close();
      await reference?.dispose();
    });

    it.each(LENGTH_CASES)(
      "greedy ids equal the reference's for the $name prompt",
      async ({ prompt }: LengthCase) => {
        const expected = await referenceGreedy(prompt);
        const prepared = generator.prepare(requestOf(prompt, MAX_NEW));
        // The same rendered chat template, tokenised the same way.
        expect(prepared.promptIds).toEqual(expected.promptIds);

        const outcome = await generator.run(prepared, () => 0.5, undefined, WHOLE_PROMPT);
        expect(outcome.ids).toEqual(expected.ids);
        expect(outcome.incomplete).toBe(!expected.stopped);

        // Usage over HTTP: one output token is enough to count the prompt, and
        // the full answers go over HTTP in the text tests below.
        const response = await runtime.post(requestOf(prompt, 1));
        expect(response.status).toBe(200);
        const body = await parsed(response);
        expect(body.usage?.input_tokens).toBe(expected.promptIds.length);
        expect(outputText(body)).toBe(reference.decode(expected.ids.slice(0, 1)));
      },
    );

    it("covers prompts of clearly different lengths", async () => {
      const lengths = await Promise.all(
        LENGTH_CASES.map(async ({ prompt }) => (await referenceGreedy(prompt)).promptIds.length),
      );
      console.log(`SmolLM2 prompt lengths in tokens: ${lengths.join(", ")}`);
      expect(Math.min(...lengths)).toBeLessThan(20);
      expect(Math.max(...lengths)).toBeGreaterThan(350);
    });

    it("answers the capital of France as the model card says, in our text and the pipeline's", async () => {
      const expected = await referenceGreedy(FRANCE);
      expect(expected.stopped).toBe(true);
      expect(reference.decode(expected.ids)).toBe(FRANCE_ANSWER);
      expect(await reference.pipelineText(FRANCE, MAX_NEW)).toBe(FRANCE_ANSWER);

      const body = await parsed(await runtime.post(requestOf(FRANCE, MAX_NEW)));
      expect(outputText(body)).toBe(FRANCE_ANSWER);
      expect(body.status).toBe("completed");
    });

    it("returns the reference's decoded text over HTTP for a longer answer", async () => {
      const prompt = LENGTH_CASES.find((c) => c.name === "question")!.prompt;
      const expected = await referenceGreedy(prompt);
      const text = reference.decode(expected.ids);
      // The pipeline decodes its own ids: the same text means the same ids.
      expect(await reference.pipelineText(prompt, MAX_NEW)).toBe(text.trim());
      const body = await parsed(await runtime.post(requestOf(prompt, MAX_NEW)));
      expect(outputText(body)).toBe(text);
    });

    it("stops at max_output_tokens with an incomplete response holding exactly that many tokens", async () => {
      const expected = await referenceGreedy(FRANCE);
      const cut = 4;
      expect(expected.ids.length).toBeGreaterThan(cut);
      const body = await parsed(await runtime.post(requestOf(FRANCE, cut)));
      expect(body.status).toBe("incomplete");
      expect(body.incomplete_details).toEqual({ reason: "max_output_tokens" });
      expect(body.usage?.output_tokens).toBe(cut);
      expect(outputText(body)).toBe(reference.decode(expected.ids.slice(0, cut)));
    });

    describe("the token limit on a 96-token runtime", () => {
      const FIRST_SENTENCE = HARBOUR_TEXT.slice(0, HARBOUR_TEXT.indexOf(".") + 1);
      const LAST_SENTENCE = GARDEN_TEXT.slice(GARDEN_TEXT.lastIndexOf(". ") + 2);
      const long: ChatPrompt = {
        instructions: "Be brief.",
        input: `${HARBOUR_TEXT} ${GARDEN_TEXT.split(". ").slice(-4).join(". ")}`,
      };
      let truncating: RunningRuntime;
      let refusing: RunningRuntime;

      beforeAll(async () => {
        const limits = { path: smol.path, modelId: MODEL_ID, threads: 2, maxTokens: 96 };
        truncating = await startRuntime({ ...limits, overflow: "truncate" });
        refusing = await startRuntime({ ...limits, overflow: "error" });
      });
      afterAll(async () => {
        await truncating?.close();
        await refusing?.close();
      });

      it("the long input really is far over the limit", () => {
        const tokens = generator.prepare(requestOf(long, 16)).promptIds.length;
        expect(tokens).toBeGreaterThan(250);
      });

      it("truncate keeps the end of the input so that prompt and output fit", async () => {
        const response = await truncating.post(requestOf(long, 16));
        expect(response.status).toBe(200);
        const body = await parsed(response);
        expect(body.usage?.input_tokens).toBeLessThanOrEqual(96 - 16);
        expect(body.usage?.output_tokens).toBeLessThanOrEqual(16);

        const prepared = generatorOf(truncating).prepare(requestOf(long, 16));
        expect(prepared.promptIds.length).toBe(body.usage?.input_tokens);
        const kept = reference.decode(prepared.promptIds);
        expect(kept).toContain(LAST_SENTENCE);
        expect(kept).not.toContain(FIRST_SENTENCE);
        expect(kept).toContain("Be brief.");
      });

      it("error refuses with 420 context_length_exceeded in a failed envelope", async () => {
        const response = await refusing.post(requestOf(long, 16));
        expect(response.status).toBe(420);
        const body = (await response.json()) as {
          status?: string;
          error?: { code?: string };
        };
        expect(body.status).toBe("failed");
        expect(body.error?.code).toBe("context_length_exceeded");
      });
    });
  },
);
