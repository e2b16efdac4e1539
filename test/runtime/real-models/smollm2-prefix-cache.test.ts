import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  responsesResponseSchema,
  type ResponsesResponse,
} from "../../../api/responses-response.js";
import { requireSharedModel } from "../../support/shared-models.js";
import { startRuntime, type RunningRuntime } from "../support/runtime-server.js";

/**
 * The prefix cache on the real SmolLM2: a conversation played turn by turn
 * (each turn carrying the earlier ones and their answers) on a runtime with
 * the cache and one without, the cached one reporting every earlier turn as
 * cached tokens. The int4 build (4-bit weights, activations quantized per
 * block of each token) must give the same greedy answers. The int8 build's
 * dynamic quantization scales activations over everything a run feeds, so
 * prefilling only the new turn changes them, as batching does (see the
 * models' README): its answers may part, and only the first turn, which
 * nothing precedes, is held equal there.
 */
const TURNS = [
  "What is the capital of France?",
  "And what is the capital of Germany?",
  "Which of the two cities is larger?",
];
const MAX_NEW = 24;

type Message = { role: "user" | "assistant"; content: string };

for (const [name, file, exact] of [
  ["smollm2-135m-instruct-int4", "genai_config.json", true],
  ["smollm2-135m-instruct", undefined, false],
] as const) {
  const model = requireSharedModel(name, file);

  describe.skipIf(!model.available)(`the prefix cache on ${name}`, () => {
    let cached: RunningRuntime;
    let plain: RunningRuntime;

    beforeAll(async () => {
      cached = await startRuntime(
        { path: model.path, modelId: name, threads: 1 },
        { generationConcurrency: 2, prefixCacheBytes: 64 * 2 ** 20 },
      );
      plain = await startRuntime(
        { path: model.path, modelId: name, threads: 1 },
        { generationConcurrency: 2, prefixCacheBytes: 0 },
      );
    });
    afterAll(async () => Promise.all([cached?.close(), plain?.close()]));

    async function converse(runtime: RunningRuntime): Promise<ResponsesResponse[]> {
      const history: Message[] = [];
      const answers: ResponsesResponse[] = [];
      for (const turn of TURNS) {
        history.push({ role: "user", content: turn });
        const response = await runtime.post({
          model: name,
          input: history,
          temperature: 0,
          max_output_tokens: MAX_NEW,
        });
        expect(response.status).toBe(200);
        const answer = responsesResponseSchema.parse(await response.json());
        answers.push(answer);
        history.push({ role: "assistant", content: answer.output[0]!.content[0]!.text });
      }
      return answers;
    }

    it(`gives the same greedy answers with the cache as without${exact ? "" : " on the first turn"}, reusing each earlier turn`, async () => {
      const withCache = await converse(cached);
      const without = await converse(plain);
      withCache.forEach((answer, t) => {
        const reference = without[t]!;
        if (exact || t === 0)
          expect(answer.output[0]!.content[0]!.text, TURNS[t]).toBe(
            reference.output[0]!.content[0]!.text,
          );
        expect(answer.usage!.input_tokens).toBe(reference.usage!.input_tokens);
        expect(reference.usage!.input_tokens_details.cached_tokens).toBe(0);
        if (t > 0) {
          expect(answer.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(
            withCache[t - 1]!.usage!.input_tokens,
          );
        }
      });
      expect(withCache[0]!.output[0]!.content[0]!.text).toContain("Paris");
    }, 120_000);
  });
}
