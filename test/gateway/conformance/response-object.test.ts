import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import { NLI, read, type Answer, type Json } from "./support.js";

/**
 * Spec 2.2 ResponsesResponse (every field, on both routes) and 2.3 the
 * classifier result, through a listening gateway and real runtimes.
 */
let p: Platform;
const SENT = {
  model: "tiny-gpt",
  input: "Hello there",
  instructions: "Be brief",
  max_output_tokens: 3,
  parallel_tool_calls: false,
  store: false,
  temperature: 0,
  top_p: 0.5,
  truncation: "disabled",
  metadata: { team: "core", ticket: "T-1" },
  text: { format: { type: "text" } },
};
const answers: Record<"api-key" | "pay", Answer> = {} as never;
let startedAt = 0;
/** The stored response each route's request continues. */
let previous: Record<"api-key" | "pay", string> = { "api-key": "", pay: "" };

beforeAll(async () => {
  p = await startPlatform();
  startedAt = Math.floor(Date.now() / 1000);
  // previous_response_id must name a stored response of the caller's, on each route.
  const first = { model: "tiny-gpt", input: "Hi", max_output_tokens: 2 };
  previous = {
    "api-key": (await read(p.api(first))).body.id as string,
    pay: (await read(p.pay(first))).body.id as string,
  };
  answers["api-key"] = await read(p.api({ ...SENT, previous_response_id: previous["api-key"] }));
  answers.pay = await read(p.pay({ ...SENT, previous_response_id: previous.pay }));
});
afterAll(async () => p?.close());

const isInt = (v: unknown) => typeof v === "number" && Number.isInteger(v);
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** One row per field of the 2.2 table: the check its value must pass. */
const FIELDS: Array<[string, (body: Json) => void]> = [
  ["id · string", (b) => expect(typeof b.id).toBe("string")],
  ["object · always response", (b) => expect(b.object).toBe("response")],
  [
    "created_at · integer (Unix seconds, now)",
    (b) => {
      expect(isInt(b.created_at)).toBe(true);
      expect(b.created_at as number).toBeGreaterThanOrEqual(startedAt - 1);
      expect(b.created_at as number).toBeLessThanOrEqual(nowSeconds() + 1);
    },
  ],
  [
    // Issue 1b (docs/adr/0002-status-incomplete.md): a response cut by
    // max_output_tokens is `incomplete`, with its reason, as the Responses API has it.
    "status · completed, or incomplete with its reason",
    (b) => {
      expect(["completed", "incomplete"]).toContain(b.status);
      if (b.status === "incomplete") {
        expect(b.incomplete_details).toEqual({ reason: "max_output_tokens" });
        expect(b.completed_at).toBeNull();
      } else expect(b.incomplete_details).toBeNull();
    },
  ],
  [
    "completed_at · integer or null, not before created_at",
    (b) => {
      if (b.completed_at === null) return;
      expect(isInt(b.completed_at)).toBe(true);
      expect(b.completed_at as number).toBeGreaterThanOrEqual(b.created_at as number);
    },
  ],
  ["error · null on success", (b) => expect(b.error).toBeNull()],
  [
    "incomplete_details · present (nullable)",
    (b) => {
      expect("incomplete_details" in b).toBe(true);
      expect(b.incomplete_details === null || typeof b.incomplete_details === "object").toBe(true);
    },
  ],
  ["instructions · the request's, echoed", (b) => expect(b.instructions).toBe(SENT.instructions)],
  [
    "max_output_tokens · the request's, echoed",
    (b) => expect(b.max_output_tokens).toBe(SENT.max_output_tokens),
  ],
  ["model · the request's model", (b) => expect(b.model).toBe(SENT.model)],
  [
    "output · array of message items",
    (b) => {
      expect(Array.isArray(b.output)).toBe(true);
      expect((b.output as unknown[]).length).toBeGreaterThan(0);
    },
  ],
  [
    "parallel_tool_calls · boolean, echoed",
    (b) => expect(b.parallel_tool_calls).toBe(SENT.parallel_tool_calls),
  ],
  [
    "previous_response_id · string or null, echoed",
    // Each route continued its own stored response.
    (b) => expect(Object.values(previous)).toContain(b.previous_response_id),
  ],
  [
    "reasoning · { effort (nullable), summary (nullable) }",
    (b) => {
      const r = b.reasoning as Json;
      expect(typeof r).toBe("object");
      expect("effort" in r && "summary" in r).toBe(true);
      expect(r.effort === null || typeof r.effort === "string").toBe(true);
      expect(r.summary === null || typeof r.summary === "string").toBe(true);
    },
  ],
  ["store · boolean, echoed", (b) => expect(b.store).toBe(SENT.store)],
  ["temperature · number or null, echoed", (b) => expect(b.temperature).toBe(SENT.temperature)],
  ["text · { format.type string }", (b) => expect(b.text).toEqual({ format: { type: "text" } })],
  ["tool_choice · string", (b) => expect(typeof b.tool_choice).toBe("string")],
  ["tools · array", (b) => expect(Array.isArray(b.tools)).toBe(true)],
  ["top_p · number or null, echoed", (b) => expect(b.top_p).toBe(SENT.top_p)],
  ["truncation · auto or disabled, echoed", (b) => expect(b.truncation).toBe(SENT.truncation)],
  [
    "usage · ResponsesUsage with every nested field, total = input + output",
    (b) => {
      const u = b.usage as Json;
      expect(isInt(u.input_tokens)).toBe(true);
      expect(u.input_tokens as number).toBeGreaterThan(0);
      expect(isInt((u.input_tokens_details as Json).cached_tokens)).toBe(true);
      expect(isInt(u.output_tokens)).toBe(true);
      expect(u.output_tokens as number).toBeGreaterThan(0);
      expect(u.output_tokens as number).toBeLessThanOrEqual(SENT.max_output_tokens);
      expect(isInt((u.output_tokens_details as Json).reasoning_tokens)).toBe(true);
      expect(u.total_tokens).toBe((u.input_tokens as number) + (u.output_tokens as number));
    },
  ],
  [
    "user · string or null",
    (b) => expect(b.user === null || typeof b.user === "string").toBe(true),
  ],
  ["metadata · object of strings, echoed", (b) => expect(b.metadata).toEqual(SENT.metadata)],
];

/** The output message item of 2.2. */
const ITEM: Array<[string, (item: Json) => void]> = [
  ["type · message", (i) => expect(i.type).toBe("message")],
  ["id · string", (i) => expect(typeof i.id).toBe("string")],
  ["status · string", (i) => expect(typeof i.status).toBe("string")],
  ["role · assistant", (i) => expect(i.role).toBe("assistant")],
  [
    "content · output_text items with text string and annotations array",
    (i) => {
      const content = i.content as Json[];
      expect(Array.isArray(content)).toBe(true);
      expect(content.length).toBeGreaterThan(0);
      for (const part of content) {
        expect(part.type).toBe("output_text");
        expect(typeof part.text).toBe("string");
        expect(Array.isArray(part.annotations)).toBe(true);
      }
    },
  ],
];

describe.each(["api-key", "pay"] as const)("2.2 · ResponsesResponse on the %s route", (route) => {
  it(`2.2 · ${route} · the request succeeded (200, JSON)`, () => {
    expect(answers[route].status).toBe(200);
    expect(answers[route].headers.get("content-type")).toMatch(/^application\/json/);
  });

  it.each(FIELDS)(`2.2 · ${route} · %s`, (_name, check) => check(answers[route].body));

  it.each(ITEM)(`2.2 · ${route} · output message item · %s`, (_name, check) => {
    for (const item of answers[route].body.output as Json[]) check(item);
  });

  it(`2.2 · ${route} · ids are resp_ and msg_ prefixed and distinct per response`, async () => {
    const again = await read(route === "pay" ? p.pay(SENT) : p.api(SENT));
    const ids = [answers[route], again].map((a) => a.body.id as string);
    expect(ids[0]).toMatch(/^resp_/);
    expect(ids[1]).toMatch(/^resp_/);
    expect(ids[0]).not.toBe(ids[1]);
    for (const item of answers[route].body.output as Json[]) expect(item.id).toMatch(/^msg_/);
  });
});

describe("2.2 · defaults in the response object", () => {
  it("2.2 · unset optional fields are null, defaults are true/true/auto, metadata {}", async () => {
    const answer = await read(p.api({ model: "tiny-gpt", input: "Hi", max_output_tokens: 1 }));
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      instructions: null,
      previous_response_id: null,
      temperature: null,
      top_p: null,
      parallel_tool_calls: true,
      store: true,
      truncation: "auto",
      metadata: {},
      error: null,
    });
  });
});

describe("2.3 · classifier result", () => {
  it.each<[string, string]>([
    ["sports", "The team scored a goal in the final minute of the match"],
    ["politics", "The senate passed the new election law after a long vote"],
    ["cooking", "The chef baked bread in the kitchen oven"],
    ["technology", "The new smartphone has a faster processor and more memory"],
  ])("2.3 · the obvious label scores highest: %s", async (label, input) => {
    const answer = await read(p.api({ ...NLI, input }));
    expect(answer.status).toBe(200);
    const scores = answer.body as Record<string, number>;
    const best = Object.entries(scores).sort((a, b) => b[1] - a[1])[0]?.[0];
    expect(best).toBe(label);
  });

  it.each(["api-key", "pay"] as const)(
    "2.3 · %s · every candidate label is a key with a fractional score, and nothing else",
    async (route) => {
      const answer = await read(route === "pay" ? p.pay(NLI) : p.api(NLI));
      expect(answer.status).toBe(200);
      expect(Object.keys(answer.body).sort()).toEqual([...NLI.categories].sort());
      for (const score of Object.values(answer.body)) {
        expect(typeof score).toBe("number");
        expect(score as number).toBeGreaterThan(0);
        expect(score as number).toBeLessThan(1);
      }
    },
  );

  it("2.3 · scores are soft probabilities, not a single forced choice", async () => {
    const answer = await read(
      p.api({ ...NLI, input: "The chef cooked dinner for the football team" }),
    );
    expect(answer.status).toBe(200);
    const scores = Object.values(answer.body) as number[];
    // Not one-hot: every label carries its own non-zero confidence.
    expect(scores.filter((s) => s > 0)).toHaveLength(scores.length);
    expect(scores.filter((s) => s === 1)).toHaveLength(0);
  });

  it("2.3 · labels are defined per request (no fixed taxonomy)", async () => {
    const labels = ["football", "baking", "elections"];
    const answer = await read(p.api({ ...NLI, categories: labels }));
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual([...labels].sort());
  });
});
