import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responsesResponseSchema, type ResponsesResponse } from "../../api/responses-response.js";
import { TINY_GPT } from "../fixtures/catalog.js";
import { loadFixtureTokenizer, type FixtureTokenizer } from "../fixtures/fixture-tokenizer.js";
import { createGptWeights, type GptWeights } from "../fixtures/gpt/weights.js";
import { mulberry32 } from "../fixtures/prng.js";
import { referenceGreedy } from "../fixtures/reference-gpt.js";
import { ENDOFTEXT_ID, IM_END_ID } from "../fixtures/tokenizer/gpt-tokenizer.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

const STOP_IDS = [ENDOFTEXT_ID, IM_END_ID];

/** The ChatML prompt, rendered here by hand: an independent check of the template path. */
function chatml(instructions: string | undefined, input: string): string {
  const system =
    instructions === undefined ? "" : `<|im_start|>system\n${instructions}<|im_end|>\n`;
  return `${system}<|im_start|>user\n${input}<|im_end|>\n<|im_start|>assistant\n`;
}

/** Greedy ids from the pure-TypeScript reference forward pass, without the stop token. */
function expectedGreedy(
  weights: GptWeights,
  promptIds: number[],
  maxNew: number,
): { ids: number[]; stopped: boolean } {
  const ids = referenceGreedy(weights, promptIds, maxNew, STOP_IDS);
  const last = ids[ids.length - 1];
  const stopped = last !== undefined && STOP_IDS.includes(last);
  return { ids: stopped ? ids.slice(0, -1) : ids, stopped };
}

async function json(response: Response): Promise<ResponsesResponse> {
  return responsesResponseSchema.parse(await response.json());
}

function outputText(body: ResponsesResponse): string {
  return body.output[0]?.content[0]?.text ?? "";
}

describe("text generation through the runtime's HTTP server", () => {
  let weights: GptWeights;
  let tokenizer: FixtureTokenizer;
  let cached: RunningRuntime;
  let uncached: RunningRuntime;
  let cachedFolder: string;

  beforeAll(async () => {
    weights = createGptWeights(TINY_GPT);
    cachedFolder = await fixtureFolder("tiny-gpt");
    tokenizer = loadFixtureTokenizer(cachedFolder);
    cached = await startRuntime({ path: cachedFolder, modelId: "tiny-gpt" });
    uncached = await startRuntime({
      path: await fixtureFolder("tiny-gpt-nocache"),
      modelId: "tiny-gpt-nocache",
    });
  });
  afterAll(async () => {
    await cached?.close();
    await uncached?.close();
  });

  it.each([
    ["Hello there", undefined],
    ["Tell me a story about the sea and the wind.", "You are terse."],
    ["x", "Answer in French."],
  ])(
    "greedy output with the KV cache equals the reference forward pass (%j)",
    async (input, instructions) => {
      const promptIds = tokenizer.encode(chatml(instructions, input)).ids;
      const expected = expectedGreedy(weights, promptIds, 16);
      const response = await cached.post({
        model: "tiny-gpt",
        input,
        instructions,
        temperature: 0,
        max_output_tokens: 16,
      });
      expect(response.status).toBe(200);
      const body = await json(response);
      expect(outputText(body)).toBe(tokenizer.decode(expected.ids, true));
      expect(body.usage).toMatchObject({
        input_tokens: promptIds.length,
        output_tokens: expected.ids.length,
        total_tokens: promptIds.length + expected.ids.length,
      });
      expect(response.headers.get("x-modelgate-input-tokens")).toBe(String(promptIds.length));
      expect(response.headers.get("x-modelgate-output-tokens")).toBe(String(expected.ids.length));
    },
  );

  it("without a cache and without a chat template, the plain prompt decodes to the reference too", async () => {
    const promptIds = tokenizer.encode("Be brief.\n\nWhere is the harbour?").ids;
    const expected = expectedGreedy(weights, promptIds, 12);
    const response = await uncached.post({
      model: "tiny-gpt-nocache",
      input: "Where is the harbour?",
      instructions: "Be brief.",
      temperature: 0,
      max_output_tokens: 12,
    });
    const body = await json(response);
    expect(body.usage?.input_tokens).toBe(promptIds.length);
    expect(outputText(body)).toBe(tokenizer.decode(expected.ids, true));
  });

  it("echoes every setting of spec 2.2 and shapes ids like the Responses API", async () => {
    const request = {
      model: "tiny-gpt",
      input: "Hi",
      instructions: "Be kind.",
      max_output_tokens: 4,
      temperature: 0,
      top_p: 0.9,
      store: false,
      parallel_tool_calls: false,
      previous_response_id: "resp_prev",
      truncation: "auto",
      metadata: { team: "search", usecase: "pii" },
      text: { format: { type: "text" } },
    };
    const before = Math.floor(Date.now() / 1000);
    const body = await json(await cached.post(request));
    expect(body.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(body.output[0]?.id).toMatch(/^msg_[0-9a-f]{48}$/);
    expect(body).toMatchObject({
      object: "response",
      model: "tiny-gpt",
      instructions: "Be kind.",
      max_output_tokens: 4,
      temperature: 0,
      top_p: 0.9,
      store: false,
      parallel_tool_calls: false,
      previous_response_id: "resp_prev",
      truncation: "auto",
      metadata: { team: "search" },
      error: null,
      reasoning: { effort: null, summary: null },
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      user: null,
    });
    expect(body.created_at).toBeGreaterThanOrEqual(before);
    expect(body.output[0]).toMatchObject({
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", annotations: [] }],
    });
  });

  it("a response cut by max_output_tokens is incomplete, one ended by end-of-sequence is completed", async () => {
    const input = "Count with me";
    const promptIds = tokenizer.encode(chatml(undefined, input)).ids;
    const expected = expectedGreedy(weights, promptIds, 6);
    const cut = await json(
      await cached.post({ model: "tiny-gpt", input, temperature: 0, max_output_tokens: 3 }),
    );
    expect(cut.status).toBe("incomplete");
    expect(cut.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(cut.completed_at).toBeNull();
    expect(cut.usage?.output_tokens).toBe(3);

    // Make the third greedy token the model's end of sequence: generation must stop before it.
    const folder = await mkdtemp(join(tmpdir(), "eos-gpt-"));
    await cp(cachedFolder, folder, { recursive: true });
    const genConfigPath = join(folder, "generation_config.json");
    const genConfig = JSON.parse(await readFile(genConfigPath, "utf8")) as Record<string, unknown>;
    await writeFile(
      genConfigPath,
      JSON.stringify({ ...genConfig, eos_token_id: [expected.ids[2]] }),
    );
    const eosRuntime = await startRuntime({ path: folder, modelId: "tiny-gpt" });
    try {
      const done = await json(
        await eosRuntime.post({ model: "tiny-gpt", input, temperature: 0, max_output_tokens: 6 }),
      );
      expect(done.status).toBe("completed");
      expect(done.incomplete_details).toBeNull();
      expect(done.completed_at).toBeGreaterThan(0);
      expect(done.usage?.output_tokens).toBe(2);
      expect(outputText(done)).toBe(tokenizer.decode(expected.ids.slice(0, 2), true));
    } finally {
      await eosRuntime.close();
    }
  });

  it("samples with temperature, reproducibly for a seeded source, and a tiny top_p is greedy", async () => {
    const input = "Once upon a time";
    const seeded = async (seed: number) => {
      const runtime = await startRuntime(
        { path: cachedFolder, modelId: "tiny-gpt" },
        {},
        mulberry32(seed),
      );
      try {
        const body = await json(
          await runtime.post({ model: "tiny-gpt", input, temperature: 1.5, max_output_tokens: 12 }),
        );
        return outputText(body);
      } finally {
        await runtime.close();
      }
    };
    const greedy = outputText(
      await json(
        await cached.post({ model: "tiny-gpt", input, temperature: 0, max_output_tokens: 12 }),
      ),
    );
    expect(await seeded(1)).toBe(await seeded(1));
    const samples = new Set([await seeded(1), await seeded(2), await seeded(3)]);
    expect(samples.size).toBeGreaterThan(1);
    expect([...samples].some((text) => text !== greedy)).toBe(true);
    const nucleus = outputText(
      await json(
        await cached.post({
          model: "tiny-gpt",
          input,
          temperature: 1,
          top_p: 1e-6,
          max_output_tokens: 12,
        }),
      ),
    );
    expect(nucleus).toBe(greedy);
  });

  it("refuses a request for another model", async () => {
    const response = await cached.post({ model: "other", input: "x" });
    expect(response.status).toBe(400);
    const body = await json(response);
    expect(body.status).toBe("failed");
    expect(body.error).toMatchObject({
      code: "model_not_found",
      param: "model",
      type: "invalid_request_error",
    });
  });

  it("exports request, token and batch metrics", async () => {
    await cached.post({ model: "tiny-gpt", input: "metrics", max_output_tokens: 2 });
    const text = await (await fetch(`${cached.url}/metrics`)).text();
    expect(text).toMatch(
      /modelgate_runtime_requests_total\{status_code="200",model="tiny-gpt"\} \d+/,
    );
    expect(text).toMatch(/modelgate_runtime_output_tokens_total\{model="tiny-gpt"\} [1-9]/);
    expect(text).toContain("modelgate_runtime_time_to_first_token_seconds_bucket");
    expect(text).toContain("modelgate_runtime_queue_depth");
  });
});

describe("the token limit on a generation model", () => {
  let truncating: RunningRuntime;
  let erroring: RunningRuntime;
  const long = "The quick brown fox jumps over the lazy dog. ".repeat(20) + "The end is here.";

  beforeAll(async () => {
    const path = await fixtureFolder("tiny-gpt");
    truncating = await startRuntime({
      path,
      modelId: "tiny-gpt",
      maxTokens: 48,
      overflow: "truncate",
    });
    erroring = await startRuntime({ path, modelId: "tiny-gpt", maxTokens: 48, overflow: "error" });
  });
  afterAll(async () => {
    await truncating?.close();
    await erroring?.close();
  });

  it("truncate keeps the end of the input so that prompt plus max_output_tokens fits", async () => {
    const body = await json(
      await truncating.post({
        model: "tiny-gpt",
        input: long,
        temperature: 0,
        max_output_tokens: 8,
      }),
    );
    expect(body.status).toBe("incomplete");
    expect(body.usage!.input_tokens).toBeLessThanOrEqual(40);
    expect(body.usage!.input_tokens).toBeGreaterThan(30);
    expect(body.usage!.output_tokens).toBe(8);
  });

  it("a max_output_tokens past the limit cuts no short input: it generates to the limit", async () => {
    for (const truncation of ["auto", "disabled"]) {
      const response = await truncating.post({
        model: "tiny-gpt",
        input: "short",
        temperature: 0,
        max_output_tokens: 1024,
        truncation,
      });
      expect(response.status, truncation).toBe(200);
      const body = await json(response);
      expect(body.usage!.total_tokens, truncation).toBe(48);
    }
  });

  it("without max_output_tokens, output stops at the limit", async () => {
    const body = await json(
      await truncating.post({ model: "tiny-gpt", input: "short", temperature: 0 }),
    );
    expect(body.usage!.total_tokens).toBeLessThanOrEqual(48);
  });

  it.each([
    ["the error policy", () => erroring, {}],
    ["truncation: disabled", () => truncating, { truncation: "disabled" }],
  ])("%s answers 420 with a failed envelope", async (_name, runtime, extra) => {
    const response = await runtime().post({ model: "tiny-gpt", input: long, ...extra });
    expect(response.status).toBe(420);
    const body = await json(response);
    expect(body.status).toBe("failed");
    expect(body.usage).toBeNull();
    expect(body.error).toMatchObject({ code: "context_length_exceeded", param: "input" });
    expect(body.error?.message).toMatch(/at most 48/);
  });

  it("the error policy serves an input that fits", async () => {
    const response = await erroring.post({
      model: "tiny-gpt",
      input: "short",
      max_output_tokens: 2,
    });
    expect(response.status).toBe(200);
  });
});
