import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INTERACTIVE_LOAD_HEADER, PRIORITY_HEADER } from "../../api/runtime-wire.js";
import { labelScores } from "../../runtime/classify/classifier.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

type Scores = Record<string, number>;

const SPORT = "The football team scored a late goal to win the match";
const POLITICS = "The minister called an election after the parliament vote";
const COOKING = "Bake the flour in the oven following the recipe";
const LABELS = ["sports", "politics", "cooking"];

async function scores(response: Response): Promise<Scores> {
  expect(response.status).toBe(200);
  return (await response.json()) as Scores;
}

function batchCount(metricsText: string): number {
  const match = /modelgate_runtime_batch_size_count\{[^}]*\} (\d+)/.exec(metricsText);
  return Number(match?.[1] ?? NaN);
}

describe("zero-shot classification (NLI) through the runtime's HTTP server", () => {
  let runtime: RunningRuntime;
  let path: string;

  beforeAll(async () => {
    path = await fixtureFolder("tiny-nli");
    runtime = await startRuntime(
      { path, modelId: "tiny-nli" },
      { batchWindowMs: 30, maxBatchSize: 16 },
    );
  });
  afterAll(async () => runtime?.close());

  it.each([
    [SPORT, "sports"],
    [POLITICS, "politics"],
    [COOKING, "cooking"],
  ])("scores the right label highest for %j", async (input, right) => {
    const body = await scores(await runtime.post({ model: "tiny-nli", input, categories: LABELS }));
    expect(Object.keys(body).sort()).toEqual([...LABELS].sort());
    for (const label of LABELS) {
      if (label === right) expect(body[label]).toBeGreaterThan(0.8);
      else expect(body[label]).toBeLessThan(0.2);
    }
  });

  it("scores labels independently: they need not sum to one", async () => {
    const body = await scores(
      await runtime.post({ model: "tiny-nli", input: `${SPORT}. ${COOKING}`, categories: LABELS }),
    );
    expect(body.sports).toBeGreaterThan(0.5);
    expect(body.cooking).toBeGreaterThan(0.5);
    expect(Object.values(body).reduce((a, b) => a + b, 0)).toBeGreaterThan(1.2);
  });

  it("tells a batch answer, and only a batch answer, the interactive load it answered beside", async () => {
    const body = { model: "tiny-nli", input: SPORT, categories: LABELS };
    // One step: the interactive requests first, the batch line in the same step's batch share.
    const [batch, ...interactive] = await Promise.all([
      runtime.post(body, { [PRIORITY_HEADER]: "batch" }),
      runtime.post(body),
      runtime.post(body),
    ]);
    expect((await scores(batch)).sports).toBeGreaterThan(0.8);
    expect(batch.headers.get(INTERACTIVE_LOAD_HEADER)).toMatch(/^\d+$/);
    for (const response of interactive) {
      expect(response.status).toBe(200);
      expect(response.headers.get(INTERACTIVE_LOAD_HEADER)).toBeNull();
    }
  });

  it("takes labels from instructions, comma-separated or in brackets", async () => {
    const plain = await scores(
      await runtime.post({ model: "tiny-nli", input: SPORT, instructions: "sports, cooking" }),
    );
    const bracketed = await scores(
      await runtime.post({ model: "tiny-nli", input: SPORT, instructions: "[sports, cooking]" }),
    );
    expect(Object.keys(plain)).toEqual(["sports", "cooking"]);
    expect(bracketed).toEqual(plain);
  });

  it("keeps a label named __proto__ as a key with its score, from categories or instructions", async () => {
    /** The raw JSON text, its own keys, and the number it writes for "__proto__". */
    async function answer(extra: Record<string, unknown>) {
      const response = await runtime.post({ model: "tiny-nli", input: SPORT, ...extra });
      expect(response.status).toBe(200);
      const text = await response.text();
      const match = /"__proto__":(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)[,}]/.exec(text);
      expect(match, text).not.toBeNull();
      const parsed = JSON.parse(text) as Scores;
      const protoScore = Number(match![1]);
      expect(protoScore).toBeGreaterThanOrEqual(0);
      expect(protoScore).toBeLessThanOrEqual(1);
      // JSON.parse makes "__proto__" an own data property: the value, not a prototype.
      expect(Object.getOwnPropertyDescriptor(parsed, "__proto__")?.value).toBe(protoScore);
      expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
      return { keys: Object.keys(parsed), parsed, protoScore };
    }

    const withSports = await answer({ categories: ["__proto__", "sports"] });
    expect(withSports.keys).toEqual(["__proto__", "sports"]);
    expect(withSports.parsed.sports).toBeGreaterThan(0.8);

    const alone = await answer({ categories: ["__proto__"] });
    expect(alone.keys).toEqual(["__proto__"]);
    expect(alone.protoScore).toBeCloseTo(withSports.protoScore, 5);

    const fromInstructions = await answer({ instructions: "[__proto__, constructor]" });
    expect(fromInstructions.keys).toEqual(["__proto__", "constructor"]);
    expect(typeof fromInstructions.parsed.constructor).toBe("number");

    // A repeated label is scored once, at its first place, as any other label is.
    const repeated = await answer({ categories: ["__proto__", "sports", "__proto__"] });
    expect(repeated.keys).toEqual(["__proto__", "sports"]);
    const plain = await scores(
      await runtime.post({
        model: "tiny-nli",
        input: SPORT,
        categories: ["sports", "cooking", "sports"],
      }),
    );
    expect(Object.keys(plain)).toEqual(["sports", "cooking"]);
  });

  it("scores labels named like Object.prototype members as plain keys", async () => {
    const labels = ["constructor", "toString", "hasOwnProperty", "valueOf", "sports"];
    const response = await runtime.post({ model: "tiny-nli", input: SPORT, categories: labels });
    const body = await scores(response);
    expect(Object.keys(body)).toEqual(labels);
    for (const label of labels)
      expect(typeof Object.getOwnPropertyDescriptor(body, label)?.value).toBe("number");
    expect(body.sports).toBeGreaterThan(0.8);
  });

  it("reports usage in headers for the bare label-to-score body", async () => {
    const response = await runtime.post({ model: "tiny-nli", input: SPORT, categories: LABELS });
    expect(Number(response.headers.get("x-modelgate-input-tokens"))).toBeGreaterThan(10);
    expect(response.headers.get("x-modelgate-output-tokens")).toBe("0");
  });

  it.each([
    [{ categories: Array.from({ length: 11 }, (_, i) => `label${i}`) }, "categories"],
    [{ input: "x".repeat(131073), categories: ["a"] }, "input"],
    [{ categories: [] }, "categories"],
  ])("refuses %#: 400 naming %s", async (extra, param) => {
    const response = await runtime.post({ model: "tiny-nli", input: SPORT, ...extra });
    expect(response.status).toBe(400);
    const body = (await response.json()) as {
      status: string;
      error: { param: string; code: string };
    };
    expect(body.status).toBe("failed");
    expect(body.error).toMatchObject({ param, code: "invalid_request" });
  });

  it("serves the longest input the variant allows by truncating it to the model", async () => {
    const input = `${"word ".repeat(26000)}${SPORT}`.slice(-131072);
    const body = await scores(await runtime.post({ model: "tiny-nli", input, categories: LABELS }));
    expect(body.sports).toBeGreaterThan(0.8);
  });

  it("batches concurrent requests into shared model runs with the same scores as one at a time", async () => {
    const inputs = [
      SPORT,
      POLITICS,
      COOKING,
      `${SPORT} again`,
      `${POLITICS} today`,
      `${COOKING} slowly`,
    ];
    const alone: Scores[] = [];
    for (const input of inputs)
      alone.push(
        await scores(await runtime.post({ model: "tiny-nli", input, categories: LABELS })),
      );
    const before = batchCount(await (await fetch(`${runtime.url}/metrics`)).text());
    const together = await Promise.all(
      inputs.map(async (input) =>
        scores(await runtime.post({ model: "tiny-nli", input, categories: LABELS })),
      ),
    );
    const after = batchCount(await (await fetch(`${runtime.url}/metrics`)).text());
    expect(after - before).toBeLessThan(inputs.length);
    together.forEach((result, i) => {
      for (const label of LABELS) expect(result[label]).toBeCloseTo(alone[i]![label]!, 5);
    });
  });
});

describe("labelScores, the label-to-score object both zero-shot methods answer", () => {
  it("defines every label as an own key, __proto__ included, that JSON.stringify writes", () => {
    const scores = [0.1, 0.2, 0.3, 0.4, 0.5];
    let i = 0;
    const built = labelScores(
      ["__proto__", "constructor", "toString", "x", "x"],
      () => scores[i++]!,
    );
    expect(Object.getPrototypeOf(built)).toBe(Object.prototype);
    expect(Object.keys(built)).toEqual(["__proto__", "constructor", "toString", "x"]);
    // A repeated label keeps its first place and its last score, as assignment did.
    expect(JSON.stringify(built)).toBe(
      '{"__proto__":0.1,"constructor":0.2,"toString":0.3,"x":0.5}',
    );
  });
});

describe("the token limit on a classifier", () => {
  it("errors with 420 under the error policy and truncates under truncate", async () => {
    const path = await fixtureFolder("tiny-nli");
    const erroring = await startRuntime({
      path,
      modelId: "tiny-nli",
      maxTokens: 8,
      overflow: "error",
    });
    const truncating = await startRuntime({
      path,
      modelId: "tiny-nli",
      maxTokens: 8,
      overflow: "truncate",
    });
    try {
      const refused = await erroring.post({ model: "tiny-nli", input: SPORT, categories: LABELS });
      expect(refused.status).toBe(420);
      expect(await refused.json()).toMatchObject({
        status: "failed",
        error: { code: "context_length_exceeded" },
      });
      // The end of the input is kept: "... to win the match" still reads as sport.
      const kept = await scores(
        await truncating.post({
          model: "tiny-nli",
          input: `${COOKING} ${SPORT}`,
          categories: LABELS,
        }),
      );
      expect(kept.sports).toBeGreaterThan(0.8);
      expect(kept.cooking).toBeLessThan(0.2);
    } finally {
      await erroring.close();
      await truncating.close();
    }
  });
});
