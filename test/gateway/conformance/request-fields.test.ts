import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import { GEN, NLI, expectFailedEnvelope, read, until, type Json } from "./support.js";

/**
 * Spec 2.1 ResponsesRequest, row by row, through a listening gateway and real
 * runtimes: each field's type (a wrong type is a 400 failed envelope whose
 * `error.param` names the field), its default as echoed in the response, its
 * allowed values and limits; then the classifier variant and the headers.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

describe("2.1 · ResponsesRequest fields accepted and echoed", () => {
  it.each<[string, Json, string, unknown]>([
    ["model (string) is echoed", {}, "model", "tiny-gpt"],
    [
      "instructions (string) is echoed",
      { instructions: "Answer briefly" },
      "instructions",
      "Answer briefly",
    ],
    ["max_output_tokens (integer) is echoed", { max_output_tokens: 3 }, "max_output_tokens", 3],
    ["max_output_tokens (null) is echoed", { max_output_tokens: null }, "max_output_tokens", null],
    ["parallel_tool_calls defaults to true", {}, "parallel_tool_calls", true],
    [
      "parallel_tool_calls false is echoed",
      { parallel_tool_calls: false },
      "parallel_tool_calls",
      false,
    ],
    [
      "previous_response_id (null) is echoed",
      { previous_response_id: null },
      "previous_response_id",
      null,
    ],
    ["store defaults to true", {}, "store", true],
    ["store false is echoed", { store: false }, "store", false],
    ["temperature (number) is echoed", { temperature: 0.7 }, "temperature", 0.7],
    ["temperature (null) is echoed", { temperature: null }, "temperature", null],
    ["top_p (number) is echoed", { top_p: 0.9 }, "top_p", 0.9],
    ["top_p (null) is echoed", { top_p: null }, "top_p", null],
    ["truncation defaults to auto", {}, "truncation", "auto"],
    ["truncation auto is echoed", { truncation: "auto" }, "truncation", "auto"],
    ["truncation disabled is echoed", { truncation: "disabled" }, "truncation", "disabled"],
    [
      "metadata (string values) is echoed",
      { metadata: { team: "core", ticket: "T-1" } },
      "metadata",
      { team: "core", ticket: "T-1" },
    ],
    [
      "text.format.type text is accepted",
      { text: { format: { type: "text" } } },
      "text",
      {
        format: { type: "text" },
      },
    ],
    ["user absent is null", {}, "user", null],
    ["user (string, an OpenAI client's field) is echoed", { user: "u-1" }, "user", "u-1"],
    // null, as the OpenAI clients send a field set to None: not given.
    ["instructions (null) is not given", { instructions: null }, "instructions", null],
    [
      "parallel_tool_calls (null) defaults to true",
      { parallel_tool_calls: null },
      "parallel_tool_calls",
      true,
    ],
    ["store (null) defaults to true", { store: null }, "store", true],
    ["truncation (null) defaults to auto", { truncation: null }, "truncation", "auto"],
    ["metadata (null) is not given", { metadata: null }, "metadata", {}],
    ["text (null) is not given", { text: null }, "text", { format: { type: "text" } }],
  ])("2.1 · %s", async (_name, extra, field, expected) => {
    const { temperature: _t, max_output_tokens: _m, ...base } = GEN;
    const body = { ...base, max_output_tokens: 2, temperature: 0, ...extra };
    const answer = await read(p.api(body));
    expect(answer.status).toBe(200);
    expect(answer.body[field]).toEqual(expected);
  });

  it("2.1 · previous_response_id (string: a stored response of the caller's) is echoed", async () => {
    const first = await read(p.api({ ...GEN, max_output_tokens: 2 }));
    expect(first.status).toBe(200);
    const id = first.body.id as string;
    const answer = await read(p.api({ ...GEN, max_output_tokens: 2, previous_response_id: id }));
    expect(answer.status).toBe(200);
    expect(answer.body.previous_response_id).toBe(id);
  });

  it("2.1 · max_output_tokens bounds the generated tokens", async () => {
    const answer = await read(p.api({ ...GEN, max_output_tokens: 3 }));
    expect(answer.status).toBe(200);
    const usage = answer.body.usage as { output_tokens: number };
    expect(usage.output_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens).toBeLessThanOrEqual(3);
  });

  it("2.1 · instructions are combined with input as a system message (more input tokens)", async () => {
    const bare = await read(p.api({ ...GEN }));
    const instructed = await read(p.api({ ...GEN, instructions: "Answer in one short word" }));
    expect(bare.status).toBe(200);
    expect(instructed.status).toBe(200);
    const tokens = (a: { body: Json }) => (a.body.usage as { input_tokens: number }).input_tokens;
    expect(tokens(instructed)).toBeGreaterThan(tokens(bare));
  });

  it.each<[string, Json]>([
    ["categories (array of string) is accepted", { categories: ["a", "b"] }],
    ["multilingual true is accepted", { multilingual: true }],
    ["multilingual false is accepted", { multilingual: false }],
    ["unknown extra properties are allowed", { foo: 1, nested: { bar: [true] }, stream: false }],
  ])("2.1 · %s", async (_name, extra) => {
    const answer = await read(p.api({ ...GEN, ...extra }));
    expect(answer.status).toBe(200);
    expect(answer.body.object).toBe("response");
  });

  it("2.1 · Content-Type application/json with a charset is accepted", async () => {
    const answer = await read(
      p.api(GEN, { headers: { "content-type": "application/json; charset=utf-8" } }),
    );
    expect(answer.status).toBe(200);
  });
});

describe("2.1 · ResponsesRequest fields rejected with the field named", () => {
  it.each<[string, Json, string | RegExp]>([
    ["model missing", { model: undefined }, "model"],
    ["model not a string", { model: 42 }, "model"],
    ["input missing", { input: undefined }, "input"],
    ["input neither a string nor a list", { input: 42 }, "input"],
    ["input a list with a string, not a message item", { input: ["Hello"] }, "input.0"],
    [
      "input item with an unknown role",
      { input: [{ role: "bot", content: "Hi" }] },
      "input.0.role",
    ],
    [
      "input item with an image part",
      { input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] },
      "input.0.content.0.type",
    ],
    ["instructions not a string", { instructions: 7 }, "instructions"],
    ["max_output_tokens not an integer", { max_output_tokens: 1.5 }, "max_output_tokens"],
    ["max_output_tokens a string", { max_output_tokens: "3" }, "max_output_tokens"],
    ["parallel_tool_calls not a boolean", { parallel_tool_calls: "yes" }, "parallel_tool_calls"],
    ["previous_response_id not a string", { previous_response_id: 5 }, "previous_response_id"],
    ["conversation (no Conversations objects here)", { conversation: "conv_1" }, "conversation"],
    ["tools (no model here calls tools)", { tools: [{ type: "web_search" }] }, "tools"],
    ["tool_choice that requires a tool", { tool_choice: "required" }, "tool_choice"],
    ["prompt (no prompt templates here)", { prompt: { id: "pmpt_1" } }, "prompt"],
    ["store not a boolean", { store: "no" }, "store"],
    ["temperature not a number", { temperature: "hot" }, "temperature"],
    ["top_p not a number", { top_p: "high" }, "top_p"],
    ["truncation outside auto|disabled", { truncation: "middle" }, "truncation"],
    ["categories not an array", { categories: "sports" }, /^categories/],
    ["categories with a non-string item", { categories: ["sports", 3] }, /^categories/],
    ["multilingual not a boolean", { multilingual: "yes" }, "multilingual"],
    ["metadata not an object", { metadata: "team=core" }, "metadata"],
    ["metadata with a non-string value", { metadata: { team: 1 } }, "metadata.team"],
    ["text.format.type json", { text: { format: { type: "json" } } }, "text.format.type"],
    [
      "text.format.type json_schema",
      { text: { format: { type: "json_schema" } } },
      "text.format.type",
    ],
  ])("2.1 · 400 · %s", async (_name, extra, param) => {
    const body = JSON.parse(JSON.stringify({ ...GEN, ...extra })) as Json;
    expectFailedEnvelope(await read(p.api(body)), { status: 400, code: "invalid_request", param });
  });
});

describe("2.1 · metadata limits (16 pairs, key 64, value 512)", () => {
  const pairs = (n: number) =>
    Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `v${i}`]));

  it.each<[string, Record<string, string>]>([
    ["16 pairs are accepted and echoed", pairs(16)],
    ["a 64-character key is accepted and echoed", { ["k".repeat(64)]: "v" }],
    ["a 512-character value is accepted and echoed", { team: "v".repeat(512) }],
  ])("2.1 · metadata · %s", async (_name, metadata) => {
    const answer = await read(p.api({ ...GEN, metadata }));
    expect(answer.status).toBe(200);
    expect(answer.body.metadata).toEqual(metadata);
  });

  it.each<[string, Record<string, string>, string]>([
    ["17 pairs are rejected", pairs(17), "metadata"],
    ["a 65-character key is rejected", { ["k".repeat(65)]: "v" }, `metadata.${"k".repeat(65)}`],
    ["a 513-character value is rejected", { team: "v".repeat(513) }, "metadata.team"],
  ])("2.1 · metadata · 400 · %s", async (_name, metadata, param) => {
    expectFailedEnvelope(await read(p.api({ ...GEN, metadata })), {
      status: 400,
      code: "invalid_request",
      param,
    });
  });

  it("2.1 · metadata · entity-extraction options are consumed and not echoed", async () => {
    const options = {
      usecase: "pii",
      schema: "person,place",
      labels: "person,place",
      threshold: "0.5",
      mask: "true",
      replacement_char: "*",
    };
    const answer = await read(p.api({ ...GEN, metadata: { team: "core", ...options } }));
    expect(answer.status).toBe(200);
    expect(answer.body.metadata).toEqual({ team: "core" });
  });
});

describe("2.1 · classifier model variant (tiny-nli)", () => {
  it("2.1 · classifier · null optional fields are taken as not given", async () => {
    const nulls = { instructions: null, metadata: null, store: null, truncation: null, text: null };
    const answer = await read(p.api({ ...NLI, ...nulls }));
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual([...NLI.categories].sort());
  });

  it("2.1 · classifier · model fixed to the classifier's id answers the label-to-score object", async () => {
    const answer = await read(p.api(NLI));
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual([...NLI.categories].sort());
  });

  it.each<[string, number]>([
    ["1 character", 1],
    ["131072 characters", 131072],
  ])("2.1 · classifier · input of %s is accepted", async (_name, length) => {
    const input = "goal ".repeat(Math.ceil(length / 5)).slice(0, length);
    expect(input.length).toBe(length);
    const answer = await read(p.api({ ...NLI, input }));
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual([...NLI.categories].sort());
  });

  it.each<[string, number]>([
    ["0 characters", 0],
    ["131073 characters", 131073],
  ])("2.1 · classifier · 400 · input of %s is rejected naming input", async (_name, length) => {
    const input = "goal ".repeat(Math.ceil(length / 5)).slice(0, length);
    expect(input.length).toBe(length);
    expectFailedEnvelope(await read(p.api({ ...NLI, input })), {
      status: 400,
      code: "invalid_request",
      param: "input",
    });
  });

  const labels = (n: number) => Array.from({ length: n }, (_, i) => `label${i}`);

  it("2.1 · classifier · 10 categories are accepted, each scored", async () => {
    const answer = await read(p.api({ ...NLI, categories: labels(10) }));
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual(labels(10).sort());
  });

  it.each<[string, Json]>([
    ["11 categories", { categories: labels(11) }],
    ["11 categories as one bracketed list", { categories: [`[${labels(11).join(", ")}]`] }],
  ])("2.1 · classifier · 400 · %s are rejected naming categories", async (_name, extra) => {
    expectFailedEnvelope(await read(p.api({ ...NLI, ...extra })), {
      status: 400,
      code: "invalid_request",
      param: "categories",
    });
  });

  it.each<[string, Json]>([
    ["categories as a bracketed comma-separated list", { categories: ["[sports, cooking]"] }],
    [
      "instructions as a comma-separated list",
      { categories: undefined, instructions: "sports, cooking" },
    ],
    [
      "instructions as a bracketed list",
      { categories: undefined, instructions: "[sports, cooking]" },
    ],
  ])("2.1 · classifier · candidate labels from %s", async (_name, extra) => {
    const body = JSON.parse(JSON.stringify({ ...NLI, ...extra })) as Json;
    const answer = await read(p.api(body));
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual(["cooking", "sports"]);
  });
});

describe("2.1 · request headers", () => {
  it("2.1 · x-project-id scopes the request to a project (metered to it)", async () => {
    const answer = await read(p.api(GEN, { headers: { "x-project-id": "web" } }));
    expect(answer.status).toBe(200);
    const id = answer.body.id as string;
    await until("the usage record", () => p.sink.counted.has(id));
    expect(p.sink.counted.get(id)).toMatchObject({ account: "acme", project: "web" });
  });

  it("2.1 · pay-agent-id becomes the caller identity with the payment provider", async () => {
    const answer = await read(p.pay(GEN, { headers: { "pay-agent-id": "agent-7" } }));
    expect(answer.status).toBe(200);
    const id = answer.headers.get("x-request-id") ?? "";
    expect(p.provider.ledger.checks.find((c) => c.requestId === id)?.agentId).toBe("agent-7");
    await until("the settlement", () =>
      p.provider.ledger.settlements.some((s) => s.requestId === id),
    );
    expect(p.provider.ledger.settlements.find((s) => s.requestId === id)?.agentId).toBe("agent-7");
  });

  it.each<[string, string, string]>([
    ["pay-request-id is echoed in logs for correlation", "pay-request-id", "payreq-4711"],
    [
      "pay-agent-id partitions logs (it is on the request's log lines)",
      "pay-agent-id",
      "agent-log-9",
    ],
  ])("2.1 · %s", async (_name, header, value) => {
    const answer = await read(p.pay(GEN, { headers: { [header]: value } }));
    expect(answer.status).toBe(200);
    const id = answer.headers.get("x-request-id") ?? "";
    await until("the request's last log line", () =>
      p.logLines.some((l) => l.includes(id) && l.includes("request completed")),
    );
    const lines = p.logLines.filter((l) => l.includes(id));
    expect(
      lines.filter((l) => l.includes(value)),
      lines.join(""),
    ).not.toHaveLength(0);
  });
});
