import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responsesResponseSchema } from "../../api/responses-response.js";
import { streamEventSchema, streamedResponseSchema } from "../../api/stream-events.js";
import { deltasOf, expectedOrder, parseEventStream } from "../support/sse-events.js";
import { fixtureFolder, startRuntime, type RunningRuntime } from "./support/runtime-server.js";

/**
 * `stream: true` on a real runtime serving generated models over loopback:
 * the event order, the text against the non-streamed answer, the refusals
 * that come before the first byte, and a cancel that stops the sequence.
 */
describe("streaming from the runtime", () => {
  let gpt: RunningRuntime;
  let nli: RunningRuntime;
  let bench: RunningRuntime;

  beforeAll(async () => {
    gpt = await startRuntime(
      {
        path: await fixtureFolder("tiny-gpt"),
        modelId: "tiny-gpt",
        maxTokens: 64,
        overflow: "error",
      },
      { prefillChunkTokens: 4 },
    );
    nli = await startRuntime({ path: await fixtureFolder("tiny-nli"), modelId: "tiny-nli" });
    bench = await startRuntime(
      { path: await fixtureFolder("bench-gpt"), modelId: "bench-gpt" },
      { generationConcurrency: 2 },
    );
  });
  afterAll(async () => {
    await Promise.all([gpt?.close(), nli?.close(), bench?.close()]);
  });

  const greedy = { model: "tiny-gpt", input: "Once upon a time", temperature: 0 };

  it("sends the events in order, numbered, with the non-streamed text and exact usage", async () => {
    const whole = responsesResponseSchema.parse(
      await (await gpt.post({ ...greedy, max_output_tokens: 24 })).json(),
    );
    const response = await gpt.post({ ...greedy, max_output_tokens: 24, stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const text = await response.text();
    expect(text).not.toContain("[DONE]");
    const events = parseEventStream(text);
    for (const { event, data } of events) {
      expect(event).toBe(data.type);
      streamEventSchema.parse(data);
    }
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_e, i) => i));
    const deltas = events.filter((e) => e.data.type === "response.output_text.delta").length;
    const terminal = `response.${whole.status}`;
    expect(events.map((e) => e.data.type)).toEqual(expectedOrder(deltas, terminal));
    expect(deltas).toBeGreaterThan(1);

    const streamedText = deltasOf(events);
    expect(streamedText).toBe(whole.output[0]!.content[0]!.text);
    const final = streamedResponseSchema.parse(events.at(-1)!.data.response);
    // The same prompt again: the prefix cache holds the whole prefill chunks of all but its last token.
    const inputTokens = whole.usage!.input_tokens;
    expect(final.usage).toEqual({
      ...whole.usage,
      input_tokens_details: { cached_tokens: Math.floor((inputTokens - 1) / 4) * 4 },
    });
    expect(final.output[0]!.content[0]!.text).toBe(streamedText);
    const itemId = final.output[0]!.id;
    for (const e of events.slice(2, -1)) {
      expect(e.data.item_id ?? (e.data.item as { id: string }).id).toBe(itemId);
    }
    const created = streamedResponseSchema.parse(events[0]!.data.response);
    expect(created).toMatchObject({ id: final.id, status: "in_progress", usage: null, output: [] });
  });

  it("uses the gateway's response id", async () => {
    const id = `resp_${"ab".repeat(24)}`;
    const response = await gpt.post(
      { ...greedy, max_output_tokens: 2, stream: true },
      { "x-modelgate-response-id": id },
    );
    const events = parseEventStream(await response.text());
    expect((events.at(-1)!.data.response as { id: string }).id).toBe(id);
  });

  it("sends the opening events first, in one write", async () => {
    const response = await gpt.post({ ...greedy, max_output_tokens: 8, stream: true });
    const decoder = new TextDecoder();
    const chunks: string[] = [];
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      chunks.push(decoder.decode(chunk, { stream: true }));
    }
    // Later events may share the read; only its complete frames are read.
    const complete = chunks[0]!.slice(0, chunks[0]!.lastIndexOf("\n\n") + 2);
    const first = parseEventStream(complete).map((e) => e.data.type);
    // Written when the model takes the request, the first delta a prefill later.
    expect(first.slice(0, 4)).toEqual(expectedOrder(1, "").slice(0, 4));
  });

  it("answers a request over the token limit with an ordinary 420, not a stream", async () => {
    const response = await gpt.post({ ...greedy, input: "word ".repeat(200), stream: true });
    expect(response.status).toBe(420);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    const body = responsesResponseSchema.parse(await response.json());
    expect(body.status).toBe("failed");
  });

  it("refuses stream: true for a classifier with a 400 naming stream", async () => {
    const response = await nli.post({
      model: "tiny-nli",
      input: "The match ended in a draw.",
      categories: ["sports", "politics"],
      stream: true,
    });
    expect(response.status).toBe(400);
    const body = responsesResponseSchema.parse(await response.json());
    expect(body.error?.param).toBe("stream");
  });

  it("stops a cancelled stream within a decode step and reports the tokens made", async () => {
    const id = `resp_${"cd".repeat(24)}`;
    const budget = 400;
    const response = await bench.post(
      {
        model: "bench-gpt",
        input: "A long story",
        temperature: 0,
        max_output_tokens: budget,
        stream: true,
      },
      { "x-modelgate-response-id": id },
    );
    expect(response.status).toBe(200);
    const decoder = new TextDecoder();
    let text = "";
    let cancelled = false;
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      // After a few deltas, cancel as the gateway does, and read on to the end.
      if (!cancelled && (text.match(/output_text\.delta/g) ?? []).length >= 6) {
        cancelled = true;
        const cancel = await fetch(`${bench.url}/v1/responses/${id}/cancel`, { method: "POST" });
        expect(cancel.status).toBe(200);
      }
    }
    expect(cancelled).toBe(true);
    const events = parseEventStream(text);
    const final = streamedResponseSchema.parse(events.at(-1)!.data.response);
    expect(events.at(-1)!.data.type).toBe("response.incomplete");
    expect(final.incomplete_details).toEqual({ reason: "client_disconnected" });
    expect(final.usage!.output_tokens).toBeGreaterThanOrEqual(6);
    expect(final.usage!.output_tokens).toBeLessThan(budget);
    // Gone from the live streams: a second cancel finds nothing.
    const again = await fetch(`${bench.url}/v1/responses/${id}/cancel`, { method: "POST" });
    expect(again.status).toBe(404);
  });

  it("stops the sequence within a step when its direct client hangs up", async () => {
    const budget = 400;
    const before = (await bench.metrics.outputTokens.get()).values[0]?.value ?? 0;
    const hangUp = new AbortController();
    const response = await fetch(`${bench.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "bench-gpt",
        input: "A long story",
        temperature: 0,
        max_output_tokens: budget,
        stream: true,
      }),
      signal: hangUp.signal,
    });
    let deltas = 0;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
        deltas += (decoder.decode(chunk, { stream: true }).match(/output_text\.delta/g) ?? [])
          .length;
        if (deltas >= 4) hangUp.abort();
      }
    } catch {
      // The hang-up ends the read.
    }
    while (bench.service.inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const produced = ((await bench.metrics.outputTokens.get()).values[0]?.value ?? 0) - before;
    expect(produced).toBeGreaterThanOrEqual(4);
    expect(produced).toBeLessThan(budget);
  });
});
