import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DecoderIO } from "../../runtime/generation/decoder-io.js";
import { alignDown, prefill } from "../../runtime/generation/prefill.js";
import type { ModelSession } from "../../runtime/engine/session.js";
import { expectExactPrefill } from "./support/prefill-exactness.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

/**
 * Chunked prefill (runtime/generation/prefill.ts) on the float32 fixtures, both
 * cache layouts: a prompt prefilled over a cached past of whole chunks gives
 * the very bits a prefill from nothing gives, logits and keys and values.
 */
const ids = (n: number, salt: number) =>
  Array.from({ length: n }, (_, i) => 5 + ((i * 7 + salt) % 40));

for (const fixture of ["tiny-gpt", "tiny-genai"] as const) {
  describe(`chunked prefill on ${fixture}`, () => {
    let runtime: RunningRuntime;
    let session: ModelSession;
    let io: DecoderIO;

    beforeAll(async () => {
      runtime = await startRuntime({ path: await fixtureFolder(fixture), modelId: fixture });
      const lane = runtime.service.lane;
      if (lane.task !== "text-generation") throw new Error("not a generator");
      ({ session, io } = lane.generator);
    });
    afterAll(async () => runtime?.close());

    it("gives the same bits over a cached past as from nothing, for a continued prompt and a shared start", async () => {
      const turn = ids(21, 0);
      const next = [...turn, ...ids(13, 3)];
      expect(await expectExactPrefill(session, io, 4, turn, next)).toBe(20);
      const other = [...turn.slice(0, 10), ...ids(9, 5)];
      expect(await expectExactPrefill(session, io, 4, other, next)).toBe(8);
      expect(await expectExactPrefill(session, io, 8, next, next)).toBe(alignDown(33, 8));
    });

    it("holds every prompt position after the last chunk, agrees with a one-run prefill to rounding, and refuses an unaligned past", async () => {
      const prompt = ids(19, 1);
      const chunked = await prefill(session, io, prompt, null, 4);
      const whole = await prefill(session, io, prompt, null, 64);
      // Same model, same tokens: the logits agree closely whatever the chunking.
      const a = chunked.outputs.lastLogits(0);
      const b = whole.outputs.lastLogits(0);
      const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);
      expect(worst).toBeLessThan(1e-4);
      const name = io.cache[0]!.pastName;
      expect(chunked.outputs.present[name]!.length).toBe(whole.outputs.present[name]!.length);
      await expect(prefill(session, io, prompt, { length: 3, tensors: {} }, 4)).rejects.toThrow(
        /chunk-aligned/,
      );
    });
  });
}
