import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { USAGE_HEADERS } from "../../../api/runtime-wire.js";
import { requireSharedModel } from "../../support/shared-models.js";
import { startRuntime, type RunningRuntime } from "../support/runtime-server.js";

const rampart = requireSharedModel("rampart-pii", "onnx/model_q4.onnx");
const MODEL = "rampart-pii";
const SENTENCE = "John Smith lives in Paris and his email is john@example.com";

interface Annotation {
  type: string;
  label: string;
  start_index: number;
  end_index: number;
  score: number;
  text?: string;
}
interface Answer {
  status: string;
  metadata: Record<string, string>;
  output: Array<{ content: Array<{ text: string; annotations: Annotation[] }> }>;
  usage: { input_tokens: number; output_tokens: number };
  error?: { param: string | null; message: string };
}

describe.skipIf(!rampart.available)("entity extraction through the runtime's HTTP route", () => {
  let runtime: RunningRuntime;
  beforeAll(async () => {
    runtime = await startRuntime({ path: rampart.path, modelId: MODEL });
  });
  afterAll(async () => {
    await runtime?.close();
  });

  async function ask(
    input: string,
    metadata?: Record<string, string>,
  ): Promise<{ status: number; body: Answer; headers: Headers }> {
    const response = await runtime.post({ model: MODEL, input, ...(metadata ? { metadata } : {}) });
    return {
      status: response.status,
      body: (await response.json()) as Answer,
      headers: response.headers,
    };
  }

  const content = (answer: Answer) => answer.output[0]!.content[0]!;

  it("answers with the input and one annotation per entity, metered as input tokens", async () => {
    const { status, body, headers } = await ask(SENTENCE, { trace: "t-1", threshold: "0.5" });
    expect(status).toBe(200);
    expect(body.status).toBe("completed");
    expect(content(body).text).toBe(SENTENCE);
    expect(
      content(body).annotations.map((a) => [a.type, a.label, a.start_index, a.end_index, a.text]),
    ).toEqual([
      ["entity", "GIVEN_NAME", 0, 4, "John"],
      ["entity", "SURNAME", 5, 10, "Smith"],
      ["entity", "EMAIL", 43, 59, "john@example.com"],
    ]);
    // The options are read, not echoed; other metadata is.
    expect(body.metadata).toEqual({ trace: "t-1" });
    // 14 word pieces, no specials counted; nothing generated.
    expect(body.usage.input_tokens).toBe(14);
    expect(body.usage.output_tokens).toBe(0);
    expect(headers.get(USAGE_HEADERS.input)).toBe("14");
    expect(headers.get(USAGE_HEADERS.output)).toBe("0");
  });

  it("gives offsets in code points, so an emoji before an entity counts once", async () => {
    const input = `😀 ${SENTENCE}`;
    const { body } = await ask(input);
    const email = content(body).annotations.find((a) => a.label === "EMAIL")!;
    expect([email.start_index, email.end_index]).toEqual([45, 61]);
    expect([...input].slice(email.start_index, email.end_index).join("")).toBe("john@example.com");
  });

  it("masks each entity with a character repeated to its length, and leaves out the entity text", async () => {
    const { body } = await ask(SENTENCE, { mask: "true" });
    expect(content(body).text).toBe("**** ***** lives in Paris and his email is ****************");
    for (const annotation of content(body).annotations) expect(annotation.text).toBeUndefined();
    const hashed = await ask(SENTENCE, { mask: "true", replacement_char: "#" });
    expect(content(hashed.body).text).toBe(
      "#### ##### lives in Paris and his email is ################",
    );
  });

  it("masks with placeholders when replacement_char is [label]", async () => {
    const { body } = await ask(SENTENCE, { mask: "true", replacement_char: "[label]" });
    expect(content(body).text).toBe(
      "[GIVEN_NAME] [SURNAME] lives in Paris and his email is [EMAIL]",
    );
  });

  it("usecase pii masks with placeholders; usecase address returns only address parts, unmasked", async () => {
    const pii = await ask(SENTENCE, { usecase: "pii" });
    expect(content(pii.body).text).toBe(
      "[GIVEN_NAME] [SURNAME] lives in Paris and his email is [EMAIL]",
    );
    const address = await ask("Springfield, IL 62704 is where John Smith lives.", {
      usecase: "address",
    });
    expect(content(address.body).annotations.map((a) => a.label)).toEqual([
      "CITY",
      "STATE",
      "ZIP_CODE",
    ]);
    expect(content(address.body).text).toBe("Springfield, IL 62704 is where John Smith lives.");
  });

  it("fills a schema: the best entity per field, or every one for a list field", async () => {
    const { body } = await ask(SENTENCE, {
      schema: JSON.stringify({
        email: "email",
        first: "GIVEN_NAME",
        phones: ["PHONE"],
        city: "CITY",
      }),
    });
    expect(JSON.parse(content(body).text)).toEqual({
      email: "john@example.com",
      first: "John",
      phones: [],
      city: null,
    });
    expect(content(body).annotations.map((a) => a.label)).toEqual(["GIVEN_NAME", "EMAIL"]);
  });

  it("takes labels in any case and returns the model's spelling", async () => {
    const { body } = await ask(SENTENCE, { labels: "[email, surname]" });
    expect(content(body).annotations.map((a) => a.label)).toEqual(["SURNAME", "EMAIL"]);
  });

  it.each([
    [
      { labels: "EMAIL, NICKNAME" },
      "metadata.labels",
      /no label 'NICKNAME'.*GIVEN_NAME, SURNAME, EMAIL/,
    ],
    [{ schema: '{"nick": "NICKNAME"}' }, "metadata.schema", /no label 'NICKNAME'/],
    [{ threshold: "1.5" }, "metadata.threshold", /number from 0 to 1/],
    [{ threshold: "high" }, "metadata.threshold", /number from 0 to 1/],
    [{ mask: "yes" }, "metadata.mask", /"true" or "false"/],
    [{ mask: "true", replacement_char: "ab" }, "metadata.replacement_char", /one character/],
    [{ replacement_char: "#" }, "metadata.replacement_char", /only when masking/],
    [{ usecase: "medical" }, "metadata.usecase", /pii, contact, address/],
    [{ schema: "[1, 2]" }, "metadata.schema", /JSON object/],
    [{ schema: '{"a": "EMAIL"}', labels: "EMAIL" }, "metadata.schema", /labels or schema/],
    [{ labels: "a,,b" }, "metadata.labels", /comma-separated/],
  ])("refuses %j with a 400 naming %s", async (metadata, param, message) => {
    const { status, body } = await ask(SENTENCE, metadata);
    expect(status).toBe(400);
    expect(body.error?.param).toBe(param);
    expect(body.error?.message).toMatch(message);
  });
});
