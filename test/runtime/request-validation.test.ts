import { describe, expect, it } from "vitest";
import { parseCandidateLabels } from "../../api/candidate-labels.js";
import { echoedMetadata } from "../../api/responses-request.js";
import { checkForTask, validateRequest } from "../../api/validation.js";

const base = { model: "m", input: "hello" };

function problemOf(body: unknown) {
  const result = validateRequest(body);
  if (result.ok) throw new Error("expected a rejection");
  return result.problem;
}

describe("ResponsesRequest validation (spec 2.1)", () => {
  it("applies the spec's defaults and keeps unknown properties", () => {
    const result = validateRequest({ ...base, extra_field: { any: 1 } });
    if (!result.ok) throw new Error(result.problem.message);
    expect(result.request).toMatchObject({
      parallel_tool_calls: true,
      store: true,
      truncation: "auto",
      extra_field: { any: 1 },
    });
  });

  it.each([
    [{ input: "x" }, "model", /Missing required parameter: 'model'/],
    [{ model: "m" }, "input", /Missing required parameter: 'input'/],
    [{ ...base, input: "" }, "input", /must not be empty/],
    [{ ...base, model: 3 }, "model", /Invalid 'model'/],
    [{ ...base, temperature: "hot" }, "temperature", /Invalid 'temperature'/],
    [{ ...base, temperature: 2.5 }, "temperature", /Invalid 'temperature'/],
    [{ ...base, top_p: -0.1 }, "top_p", /Invalid 'top_p'/],
    [{ ...base, top_p: 1.5 }, "top_p", /Invalid 'top_p'/],
    [{ ...base, max_output_tokens: 1.5 }, "max_output_tokens", /Invalid/],
    [{ ...base, max_output_tokens: 0 }, "max_output_tokens", /Invalid/],
    // Past the cap, however far: the cap is what the message names.
    [{ ...base, max_output_tokens: 99999999999 }, "max_output_tokens", /at most 2147483647/],
    [{ ...base, max_output_tokens: 1e300 }, "max_output_tokens", /at most 2147483647/],
    [{ ...base, max_output_tokens: 2 ** 53 + 2 }, "max_output_tokens", /at most 2147483647/],
    [{ ...base, truncation: "sometimes" }, "truncation", /Invalid 'truncation'/],
    [{ ...base, store: "yes" }, "store", /Invalid 'store'/],
    [{ ...base, parallel_tool_calls: 1 }, "parallel_tool_calls", /Invalid/],
    [{ ...base, previous_response_id: 5 }, "previous_response_id", /Invalid/],
    // No Conversations objects here: an id would be dropped, the turns it meant unseen.
    [
      { ...base, conversation: "conv_1" },
      "conversation",
      /continue a conversation with `previous_response_id`/,
    ],
    [{ ...base, conversation: { id: "conv_1" } }, "conversation", /not served here/],
    [
      { ...base, tools: [{ type: "function", name: "f", parameters: {} }] },
      "tools",
      /tools are not served here/,
    ],
    [{ ...base, tool_choice: "required" }, "tool_choice", /send `none` or `auto`/],
    [{ ...base, tool_choice: { type: "function", name: "f" } }, "tool_choice", /no tools/],
    [{ ...base, prompt: { id: "pmpt_1" } }, "prompt", /prompt templates are not served here/],
    [{ ...base, categories: "a,b" }, "categories", /Invalid 'categories'/],
    [{ ...base, multilingual: "no" }, "multilingual", /Invalid 'multilingual'/],
    [
      { ...base, text: { format: { type: "json" } } },
      "text.format.type",
      /`json` is currently rejected/,
    ],
    [{ ...base, metadata: { k: 1 } }, "metadata.k", /expected string/],
    [{ ...base, metadata: { ["k".repeat(65)]: "v" } }, `metadata.${"k".repeat(65)}`, /at most 64/],
    [{ ...base, metadata: { k: "v".repeat(513) } }, "metadata.k", /at most 512/],
  ])("rejects %j naming %s", (body, param, message) => {
    const problem = problemOf(body);
    expect(problem.param).toBe(param);
    expect(problem.message).toMatch(message);
  });

  it("takes a null conversation as not given", () => {
    expect(validateRequest({ ...base, conversation: null }).ok).toBe(true);
  });

  it("takes no tools, a tool choice that requires none and a null prompt as not given", () => {
    for (const fields of [
      { tools: [] },
      { tools: null },
      { tool_choice: "none" },
      { tool_choice: "auto" },
      { prompt: null },
    ]) {
      expect(validateRequest({ ...base, ...fields }).ok).toBe(true);
    }
  });

  it("takes 16 metadata pairs and refuses a 17th", () => {
    const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, "v"]));
    expect(validateRequest({ ...base, metadata: sixteen }).ok).toBe(true);
    const problem = problemOf({ ...base, metadata: { ...sixteen, k16: "v" } });
    expect(problem.param).toBe("metadata");
    expect(problem.message).toMatch(/17 pairs; at most 16/);
  });

  it("accepts keys of 64 and values of 512 characters exactly", () => {
    const metadata = { ["k".repeat(64)]: "v".repeat(512) };
    expect(validateRequest({ ...base, metadata }).ok).toBe(true);
  });

  it("consumes the entity-extraction options and echoes only the rest", () => {
    // Strings, as every metadata value (spec 2.1); an extractor parses them.
    const metadata = {
      usecase: "pii",
      schema: '{"a": "person"}',
      threshold: "0.5",
      labels: "x",
      mask: "true",
      replacement_char: "*",
      team: "a",
    };
    expect(validateRequest({ ...base, metadata }).ok).toBe(true);
    expect(echoedMetadata(metadata)).toEqual({ team: "a" });
  });

  it("accepts text.format.type text and null settings", () => {
    const body = {
      ...base,
      text: { format: { type: "text" } },
      temperature: null,
      top_p: null,
      max_output_tokens: null,
    };
    expect(validateRequest(body).ok).toBe(true);
  });

  it("rejects a body that is not an object", () => {
    expect(problemOf([1, 2]).message).toMatch(/JSON object/);
    expect(problemOf("text").message).toMatch(/JSON object/);
  });
});

describe("classifier variant (spec 2.1, 8)", () => {
  const request = (extra: object) => {
    const result = validateRequest({ ...base, ...extra });
    if (!result.ok) throw new Error(result.problem.message);
    return result.request;
  };

  it("takes input of 1 to 131072 characters", () => {
    expect(
      checkForTask(
        request({ input: "x".repeat(131072), categories: ["a"] }),
        "zero-shot-classification",
      ),
    ).toBeNull();
    const problem = checkForTask(
      request({ input: "x".repeat(131073), categories: ["a"] }),
      "zero-shot-classification",
    );
    expect(problem?.param).toBe("input");
  });

  it("takes at most 10 categories", () => {
    const ten = Array.from({ length: 10 }, (_, i) => `c${i}`);
    expect(checkForTask(request({ categories: ten }), "zero-shot-classification")).toBeNull();
    const problem = checkForTask(
      request({ categories: [...ten, "c10"] }),
      "zero-shot-classification",
    );
    expect(problem).toMatchObject({ param: "categories" });
    expect(problem?.message).toMatch(/0 to 10 single labels/);
  });

  it("needs candidate labels", () => {
    expect(checkForTask(request({}), "zero-shot-classification")?.param).toBe("categories");
  });

  it("does not apply to generation models", () => {
    expect(checkForTask(request({ input: "x".repeat(200000) }), "text-generation")).toBeNull();
  });
});

describe("candidate labels", () => {
  it.each([
    [{ categories: ["sports", "politics"] }, ["sports", "politics"]],
    [{ categories: ["[sports, politics, cooking]"] }, ["sports", "politics", "cooking"]],
    [{ instructions: "sports, politics" }, ["sports", "politics"]],
    [{ instructions: "[sports,politics]" }, ["sports", "politics"]],
    [{ instructions: "['sports', \"politics\"]" }, ["sports", "politics"]],
    [{ categories: ["a", "a", " b "] }, ["a", "b"]],
    [{ categories: [], instructions: "x, y" }, ["x", "y"]],
    [{ categories: ["a"], instructions: "x, y" }, ["a"]],
    [{}, []],
  ])("%j gives %j", (request, labels) => {
    expect(parseCandidateLabels(request)).toEqual(labels);
  });
});
