import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  responsesResponseSchema,
  type ResponsesResponse,
} from "../../../api/responses-response.js";
import { validateRequest } from "../../../api/validation.js";
import { PREFILL_CHUNK_TOKENS } from "../../../runtime/generation/prefill.js";
import { requireSharedModel } from "../../support/shared-models.js";
import { expectExactPrefill } from "../support/prefill-exactness.js";
import { startRuntime, type RunningRuntime } from "../support/runtime-server.js";

/**
 * The prefix cache on the real SmolLM2: a conversation of eight turns played
 * turn by turn (each turn carrying the earlier ones and their answers) on a
 * runtime with the cache and one without. Both prefill in the same
 * position-aligned chunks and the cache gives back only whole chunks a
 * prefill computed, so each chunk is the same computation either way: the
 * greedy answers must be identical on every turn, on the int4 build (4-bit
 * weights, int8 activations per block) and on the int8 build (activation
 * scales over everything a run feeds, so a prefill of only the new turn in
 * one run would change them). And below the HTTP API: the first output
 * token's logits and every key and value, bit for bit.
 */
const TURNS = [
  "What is the capital of France?",
  "And what is the capital of Germany?",
  "Which of the two cities is larger?",
  "What river runs through the first one?",
  "Name a famous museum there.",
  "What can I see in it?",
  "How long should I plan for a visit?",
  "Summarise our conversation in one sentence.",
];
const MAX_NEW = 24;

type Message = { role: "user" | "assistant"; content: string };

for (const [name, file] of [
  ["smollm2-135m-instruct-int4", "genai_config.json"],
  ["smollm2-135m-instruct", undefined],
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

    it("gives the same greedy answers with the cache as without over eight turns, reusing each earlier turn's whole chunks", async () => {
      const withCache = await converse(cached);
      const without = await converse(plain);
      withCache.forEach((answer, t) => {
        const reference = without[t]!;
        expect(answer.output[0]!.content[0]!.text, TURNS[t]).toBe(
          reference.output[0]!.content[0]!.text,
        );
        expect(answer.usage!.input_tokens).toBe(reference.usage!.input_tokens);
        expect(reference.usage!.input_tokens_details.cached_tokens).toBe(0);
        const got = answer.usage!.input_tokens_details.cached_tokens;
        expect(got % PREFILL_CHUNK_TOKENS).toBe(0);
        if (t > 0) {
          const previous = withCache[t - 1]!.usage!.input_tokens;
          expect(got, TURNS[t]).toBeGreaterThanOrEqual(
            previous - (previous % PREFILL_CHUNK_TOKENS),
          );
        }
      });
      expect(withCache.at(-1)!.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(
        2 * PREFILL_CHUNK_TOKENS,
      );
      expect(withCache[0]!.output[0]!.content[0]!.text).toContain("Paris");
    }, 300_000);

    it("prefills over cached chunks to the same bits as from nothing", async () => {
      const lane = cached.service.lane;
      if (lane.task !== "text-generation") throw new Error("not a generator");
      const { session, io } = lane.generator;
      const validation = validateRequest({ model: name, input: TURNS.join(" ").repeat(3) });
      if (!validation.ok) throw new Error(validation.problem.message);
      const tokens = lane.generator.prepare(validation.request).promptIds;
      const earlier = tokens.slice(0, 150);
      const got = await expectExactPrefill(session, io, PREFILL_CHUNK_TOKENS, earlier, tokens);
      expect(got).toBe(128);
    }, 120_000);
  });
}
