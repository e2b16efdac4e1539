import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import { GEN, NLI, expectErrorEnvelope, expectFailedEnvelope, read, type Json } from "./support.js";

/**
 * Spec section 8, row by row, at each limit and one past it. The batch-size
 * row belongs to the batch interface, which this gateway does not serve.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

const text = (length: number) => "goal ".repeat(Math.ceil(length / 5) + 1).slice(0, length);
const labels = (n: number) => Array.from({ length: n }, (_, i) => `topic${i}`);
const pairs = (n: number) => Object.fromEntries(labels(n).map((k) => [k, "v"]));

describe("8 · classifier input length: 1 to 131072 characters", () => {
  it.each([1, 2, 131071, 131072])("8 · input of %i characters is classified", async (length) => {
    const answer = await read(p.api({ ...NLI, input: text(length) }));
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual([...NLI.categories].sort());
  });

  it.each([0, 131073, 200000])("8 · 400 · input of %i characters is refused", async (length) => {
    expectFailedEnvelope(await read(p.api({ ...NLI, input: text(length) })), {
      status: 400,
      code: "invalid_request",
      param: "input",
    });
  });

  it("8 · the limit is on the classifier variant only: a generator takes more than 131072 characters to its token check", async () => {
    // 131073 characters are far over tiny-gpt's 256 tokens: the refusal is the
    // token limit (420), not the classifier's character limit (400).
    const answer = await read(p.api({ ...GEN, input: "x".repeat(131073) }));
    expectFailedEnvelope(answer, { status: 420, code: "context_length_exceeded" });
  });
});

describe("8 · categories: at most 10 (classifier variant)", () => {
  it.each([1, 9, 10])("8 · %i categories are each scored", async (n) => {
    const answer = await read(p.api({ ...NLI, categories: labels(n) }));
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual(labels(n).sort());
  });

  it.each<[string, Json, string]>([
    ["11 categories", { categories: labels(11) }, "categories"],
    ["20 categories", { categories: labels(20) }, "categories"],
    // The labels came from `instructions`, so that is the field named.
    [
      "11 labels in instructions",
      { categories: undefined, instructions: labels(11).join(", ") },
      "instructions",
    ],
  ])("8 · 400 · %s are refused", async (_n, extra, param) => {
    const body = JSON.parse(JSON.stringify({ ...NLI, ...extra })) as Json;
    expectFailedEnvelope(await read(p.api(body)), {
      status: 400,
      code: "invalid_request",
      param,
    });
  });
});

describe("8 · metadata: at most 16 string key/value pairs", () => {
  it.each<["api-key" | "pay"]>([["api-key"], ["pay"]])(
    "8 · %s · 16 pairs are accepted and echoed",
    async (route) => {
      const body = { ...GEN, metadata: pairs(16) };
      const answer = await read(route === "pay" ? p.pay(body) : p.api(body));
      expect(answer.status).toBe(200);
      expect(answer.body.metadata).toEqual(pairs(16));
    },
  );

  it.each<["api-key" | "pay"]>([["api-key"], ["pay"]])(
    "8 · %s · 400 · 17 pairs are refused naming metadata",
    async (route) => {
      const body = { ...GEN, metadata: pairs(17) };
      expectFailedEnvelope(await read(route === "pay" ? p.pay(body) : p.api(body)), {
        status: 400,
        code: "invalid_request",
        param: "metadata",
      });
    },
  );
});

describe("8 · input tokens must not exceed the model's max_tokens (tiny-gpt: 256, overflow error)", () => {
  /** tiny-gpt's fixture tokenizer maps each "x" to one token; the prompt adds a fixed overhead. */
  async function overhead(): Promise<number> {
    const answer = await read(p.api({ ...GEN, input: "x", max_output_tokens: 1 }));
    expect(answer.status).toBe(200);
    return (answer.body.usage as { input_tokens: number }).input_tokens - 1;
  }

  it("8 · an input of exactly 256 tokens is served", async () => {
    const input = "x".repeat(256 - (await overhead()));
    const answer = await read(p.api({ ...GEN, input, max_output_tokens: 1 }));
    expect(answer.status).toBe(200);
    expect((answer.body.usage as { input_tokens: number }).input_tokens).toBe(256);
  });

  it.each<[string, Json]>([
    ["257 tokens", {}],
    [
      "257 tokens with truncation auto (the model errors rather than truncates)",
      { truncation: "auto" },
    ],
    ["257 tokens with truncation disabled", { truncation: "disabled" }],
  ])("8 · 420 · an input of %s is refused", async (_n, extra) => {
    const input = "x".repeat(257 - (await overhead()));
    expectFailedEnvelope(await read(p.api({ ...GEN, ...extra, input })), {
      status: 420,
      code: "context_length_exceeded",
    });
  });
});

describe("8 · rate limits", () => {
  it("8 · a rate-limited call gets 429 with Retry-After", async () => {
    const key = p.keys.limited.key;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await read(p.api(GEN, { key })));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
    expectErrorEnvelope(answers[2]!, 429, "rate_limit_exceeded");
    expect(answers[2]!.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
  });

  it("8 · rate limits are per key: another key is not limited by the first", async () => {
    expect((await read(p.api(GEN, { key: p.keys.limited.key }))).status).toBe(429);
    expect((await read(p.api(GEN))).status).toBe(200);
  });
});
