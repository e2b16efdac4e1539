import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PREFERRED_LOAD_MARGIN } from "../../../gateway/upstream/pick.js";
import {
  fixtureFolder,
  startRuntime,
  type RunningRuntime,
} from "../../runtime/support/runtime-server.js";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * Prefix-aware routing end to end (docs/prefix-cache.md): two real runtimes
 * serve `tiny-gpt` behind one gateway. A continued conversation goes back to
 * the runtime that served its previous turn (the stored `served_by`), whose
 * prefix cache holds it; when that runtime is not ready (gone from the
 * model's endpoints) or carries more than the margin beyond the least
 * loaded, to the least loaded, and the conversation then stays there.
 * bench-gpt is the decoder: slow enough per token for streams to stay in
 * flight while the next request is routed.
 */
let p: Platform;
let second: RunningRuntime;
let both: readonly string[];

interface Answer {
  id: string;
  usage: { input_tokens_details: { cached_tokens: number } };
}
const GEN = { model: "tiny-gpt", max_output_tokens: 4, temperature: 0 };

beforeAll(async () => {
  p = await startPlatform({ withoutPayments: true, gptFixture: "bench-gpt" });
  second = await startRuntime({
    path: await fixtureFolder("bench-gpt"),
    modelId: "tiny-gpt",
    maxTokens: 256,
    overflow: "error",
  });
  both = [p.runtimes.gpt.url, second.url];
  setEndpoints(both);
});
afterAll(async () => Promise.all([p?.close(), second?.close()]));

/** The model's ready endpoints, as the registry's source would publish them. */
function setEndpoints(endpoints: readonly string[]): void {
  const registry = p.components.deps.registry;
  const model = registry.resolve("tiny-gpt")!;
  registry.upsert({ ...model, endpoints });
}

async function ask(input: string, previous?: string): Promise<Answer> {
  const res = await p.api({
    ...GEN,
    input,
    ...(previous ? { previous_response_id: previous } : {}),
  });
  const body = (await res.json()) as Answer;
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body;
}

async function servedBy(id: string): Promise<string | null> {
  const db = await p.components.store.db();
  const row = await db
    .selectFrom("stored_responses")
    .select("served_by")
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
  return row.served_by;
}

describe("prefix-aware routing across two runtimes of one model", () => {
  it("sends every turn of a conversation to the runtime that served the one before", async () => {
    const firsts = await Promise.all(
      // Long enough for the runtimes to keep whole prefill chunks of them.
      ["Tell me about ships", "Tell me about trains", "Tell me about planes", "Hello"].map((q) =>
        ask(`${q}, ${"slowly and ".repeat(25)}in detail`),
      ),
    );
    const homes = await Promise.all(firsts.map((a) => servedBy(a.id)));
    // Without a preference the load spreads: both runtimes start conversations.
    expect(new Set(homes)).toEqual(new Set(both));
    for (const [c, first] of firsts.entries()) {
      let previous = first;
      for (const question of ["And then?", "Say more", "Why?"]) {
        const next = await ask(question, previous.id);
        expect(await servedBy(next.id), `conversation ${c}`).toBe(homes[c]);
        // Its prefix cache held the earlier turns' whole chunks.
        expect(next.usage.input_tokens_details.cached_tokens).toBeGreaterThan(0);
        previous = next;
      }
    }
  }, 60_000);

  it("moves a conversation to the other runtime while its own is not ready, and keeps it there", async () => {
    const first = await ask("Tell me about harbours");
    const home = (await servedBy(first.id))!;
    const other = both.find((e) => e !== home)!;
    setEndpoints([other]);
    try {
      const moved = await ask("And then?", first.id);
      expect(await servedBy(moved.id)).toBe(other);
      setEndpoints(both);
      const stays = await ask("Say more", moved.id);
      expect(await servedBy(stays.id)).toBe(other);
    } finally {
      setEndpoints(both);
    }
  }, 60_000);

  it("sends a continuation to the least loaded runtime when its own carries more than the margin beyond it", async () => {
    const first = await ask("Tell me about lighthouses");
    const home = (await servedBy(first.id))!;
    const other = both.find((e) => e !== home)!;
    const load = () => p.components.deps.upstream.load();
    const streams: Response[] = [];
    try {
      // Continuations of the same conversation load its runtime: each is routed home
      // while home carries at most the margin beyond the other, which carries none.
      for (let i = 0; i <= PREFERRED_LOAD_MARGIN; i++) {
        const res = await p.api({
          ...GEN,
          input: "Tell me a very long story",
          previous_response_id: first.id,
          max_output_tokens: 220,
          stream: true,
          store: false,
        });
        expect(res.status).toBe(200);
        streams.push(res); // headers came with the first token: it is in flight
      }
      expect(load().get(home)).toBe(PREFERRED_LOAD_MARGIN + 1);
      expect(load().get(other) ?? 0).toBe(0);
      const moved = await ask("And then?", first.id);
      expect(await servedBy(moved.id)).toBe(other);
    } finally {
      await Promise.all(streams.map((s) => s.body!.cancel().catch(() => {})));
    }
  }, 60_000);
});
