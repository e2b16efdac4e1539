import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixtureFolder, startRuntime, type RunningRuntime } from "../support/runtime-server.js";

// The span method through the runtime's HTTP server, on the generated GLiNER model.
let runtime: RunningRuntime;

beforeAll(async () => {
  runtime = await startRuntime({ path: await fixtureFolder("tiny-gliner"), modelId: "gliner" });
});
afterAll(async () => {
  await runtime.close();
});

interface Annotation {
  type: string;
  label: string;
  start_index: number;
  end_index: number;
  score: number;
  text?: string;
}

async function extract(input: string, metadata: Record<string, string>) {
  const response = await runtime.post({ model: "gliner", input, metadata });
  const body = (await response.json()) as {
    output: Array<{ content: Array<{ text: string; annotations: Annotation[] }> }>;
    usage: { input_tokens: number };
    error?: { param: string; message: string };
  };
  return { status: response.status, body, content: body.output?.[0]?.content[0] };
}

describe("entity extraction with a span model over HTTP", () => {
  it("is served as an entity-extraction model, read from gliner_config.json and the graph", () => {
    expect(runtime.service.task).toBe("entity-extraction");
  });

  it("answers the labels asked for, with code-point offsets into the input", async () => {
    const input = "Café 😀 Alice met Bob Jones in Paris for Acme";
    const { status, content } = await extract(input, { labels: "[person, city]" });
    expect(status).toBe(200);
    expect(content!.text).toBe(input);
    const chars = [...input];
    expect(
      content!.annotations.map((a) => [
        a.label,
        a.text,
        chars.slice(a.start_index, a.end_index).join(""),
      ]),
    ).toEqual([
      ["person", "Alice", "Alice"],
      ["person", "Bob Jones", "Bob Jones"],
      ["city", "Paris", "Paris"],
    ]);
    expect(content!.annotations[0]).toMatchObject({
      type: "entity",
      start_index: 7,
      end_index: 12,
    });
  });

  it("applies the threshold and masks with the label placeholder", async () => {
    const { content } = await extract("Sam met Alice", {
      labels: "person",
      threshold: "0.9",
      mask: "true",
      replacement_char: "[label]",
    });
    expect(content!.text).toBe("Sam met [person]");
    expect(content!.annotations).toHaveLength(1);
    expect(content!.annotations[0]!.text).toBeUndefined();
  });

  it("reads a text past max_len words in windows, and takes a usecase's labels and masking", async () => {
    const filler = "the ".repeat(60);
    const { content } = await extract(`${filler}Bob Jones works at Initech in Berlin`, {
      usecase: "pii",
    });
    // pii asks a span model for "person" among others; tiny-gliner knows no "address".
    expect(content!.text).toBe(`${filler}[person] works at Initech in Berlin`);
    expect(content!.annotations.map((a) => [a.label, a.start_index])).toEqual([
      ["person", filler.length],
    ]);
  });

  it("answers each of several concurrent requests as alone", async () => {
    const inputs = ["Alice in London", "Carol at Globex", "Tokyo and Paris", "nothing here"];
    const alone = [];
    for (const input of inputs)
      alone.push((await extract(input, { labels: "person, place, company" })).content);
    const together = await Promise.all(
      inputs.map(
        async (input) => (await extract(input, { labels: "person, place, company" })).content,
      ),
    );
    expect(together).toEqual(alone);
    expect(together.map((c) => c!.annotations.length)).toEqual([2, 2, 2, 0]);
  });

  it("refuses a request without labels, naming metadata.labels", async () => {
    const { status, body } = await extract("Alice", {});
    expect(status).toBe(400);
    expect(body.error!.param).toBe("metadata.labels");
  });
});
