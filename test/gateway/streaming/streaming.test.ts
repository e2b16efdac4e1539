import { request as httpRequest, type IncomingMessage } from "node:http";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { textGenerationRequestSchema } from "../../../api/responses-request.js";
import { completedResponse } from "../../../api/responses-response.js";
import { sseFrame, streamedResponseSchema } from "../../../api/stream-events.js";
import { until } from "../conformance/support.js";
import { deltasOf, expectedOrder, parseEventStream } from "../../support/sse-events.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { standInRuntime } from "../support/stand-in-runtime.js";

/**
 * `stream: true` through a real gateway to a real runtime, driven by the
 * official `openai` client and by raw HTTP where the client cannot see
 * (trailers, hanging up mid-stream). `tiny-gpt` is the bench-gpt fixture
 * here: slow enough per token that a client can leave mid-stream.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform({ gptFixture: "bench-gpt" });
});
afterAll(async () => p?.close());

const GREEDY = {
  model: "tiny-gpt",
  input: "Tell me about the sea",
  max_output_tokens: 40,
  temperature: 0,
} as const;

const client = () =>
  new OpenAI({ apiKey: p.keys.acme.key, baseURL: `${p.url}/v1`, maxRetries: 0, timeout: 20_000 });

interface RawAnswer {
  response: IncomingMessage;
  text: string;
}

/** A raw POST that reads the body to its end, trailers included, or hangs up once `leave` says so. */
function rawPost(
  path: string,
  body: string,
  headers: Record<string, string>,
  leave?: (textSoFar: string) => boolean,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${p.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
    });
    req.on("error", reject);
    req.on("response", (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        text += chunk;
        if (leave?.(text)) {
          req.destroy();
          resolve({ response, text });
        }
      });
      response.on("end", () => resolve({ response, text }));
      response.on("error", () => resolve({ response, text }));
    });
    req.end(body);
  });
}

describe("streaming through the gateway with the openai client", () => {
  it("iterates responses.create({stream: true}) to the end: events in order, the greedy text, exact usage billed", async () => {
    const whole = await client().responses.create(GREEDY);
    const stream = await client().responses.create({ ...GREEDY, stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);

    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_e, i) => i));
    const deltas = events.filter((e) => e.type === "response.output_text.delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(events.map((e) => e.type)).toEqual(
      expectedOrder(deltas.length, `response.${whole.status}`),
    );
    const text = deltas.map((e) => e.delta).join("");
    expect(text).toBe(whole.output_text);

    const last = events.at(-1)!;
    if (last.type !== "response.completed" && last.type !== "response.incomplete") {
      throw new Error(`ended with ${last.type}`);
    }
    // The prompt again: the runtime's prefix cache may hold it, so cached_tokens may differ.
    expect({ ...last.response.usage, input_tokens_details: null }).toEqual({
      ...whole.usage,
      input_tokens_details: null,
    });
    expect(last.response.output_text ?? text).toBe(text);
    // Billed once, from the terminal event, exactly.
    const id = last.response.id;
    await until("the usage record", () => p.sink.counted.has(id));
    expect(p.sink.counted.get(id)).toMatchObject({
      account: "acme",
      input_tokens: whole.usage!.input_tokens,
      output_tokens: whole.usage!.output_tokens,
    });
  });

  it("gets the final response from responses.stream(...).finalResponse()", async () => {
    const whole = await client().responses.create(GREEDY);
    const pieces: string[] = [];
    const stream = client()
      .responses.stream(GREEDY)
      .on("response.output_text.delta", (e) => pieces.push(e.delta));
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(whole.output_text);
    expect(pieces.join("")).toBe(whole.output_text);
    expect({ ...final.usage, input_tokens_details: null }).toEqual({
      ...whole.usage,
      input_tokens_details: null,
    });
  });

  it("refuses a stream for a classifier with a BadRequestError naming stream", async () => {
    const error = await client()
      .responses.create({
        model: "tiny-nli",
        input: "The match ended in a draw.",
        instructions: "sports, politics",
        stream: true,
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("stream");
  });

  it("answers a request over the token limit with the ordinary 420 before any event", async () => {
    const error = await client()
      .responses.create({ ...GREEDY, input: "word ".repeat(400), stream: true })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(420);
  });
});

describe("streaming on the payment route", () => {
  it("announces pay-usage as a trailer and sends it there and in the terminal event", async () => {
    const raw = JSON.stringify({ ...GREEDY, stream: true });
    const { response, text } = await rawPost("/pay/v1/responses", raw, {
      "pay-signature": p.sign(raw),
    });
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(response.headers.trailer).toBe("pay-usage");
    expect(response.headers["x-request-id"]).toMatch(/\S/);
    expect(response.headers["x-inference-type"]).toBe("cloud");
    expect(response.headers["pay-usage"]).toBeUndefined();
    const events = parseEventStream(text);
    const final = streamedResponseSchema.parse(events.at(-1)!.data.response);
    const expected = `slug="tiny-gpt", input_tokens=${final.usage!.input_tokens}, output_tokens=${final.usage!.output_tokens}`;
    expect(response.trailers["pay-usage"]).toBe(expected);
    expect(final.pay_usage).toBe(expected);
    expect(deltasOf(events)).toBe(final.output[0]!.content[0]!.text);
    await until("the settlement", () =>
      p.provider.ledger.settlements.some((s) => s.responseId === final.id),
    );
    expect(p.provider.ledger.settlements.find((s) => s.responseId === final.id)).toMatchObject({
      inputTokens: final.usage!.input_tokens,
      outputTokens: final.usage!.output_tokens,
    });
  });
});

describe("a client that leaves mid-stream", () => {
  it("stops the runtime's sequence and is billed the tokens produced so far", async () => {
    const budget = 200;
    // Alone, the request uses its whole budget: an early stop below is the hang-up's doing.
    const alone = await client().responses.create({ ...GREEDY, max_output_tokens: budget });
    expect(alone.usage!.output_tokens).toBe(budget);
    const outputBefore = (await p.runtimes.gpt.metrics.outputTokens.get()).values[0]?.value ?? 0;
    const raw = JSON.stringify({ ...GREEDY, max_output_tokens: budget, stream: true });
    const { text } = await rawPost(
      "/v1/responses",
      raw,
      { "x-api-key": p.keys.acme.key },
      (soFar) => (soFar.match(/output_text\.delta/g) ?? []).length >= 5,
    );
    const created = parseEventStream(text.slice(0, text.indexOf("\n\n") + 2))[0]!;
    const id = (created.data.response as { id: string }).id;
    await until("the usage record", () => p.sink.counted.has(id));
    const record = p.sink.counted.get(id) as { input_tokens: number; output_tokens: number };
    // The runtime stopped early, and the record holds what it produced.
    expect(record.output_tokens).toBeGreaterThanOrEqual(5);
    expect(record.output_tokens).toBeLessThan(budget);
    await until("the runtime to finish", () => p.runtimes.gpt.service.inFlight === 0);
    const outputAfter = (await p.runtimes.gpt.metrics.outputTokens.get()).values[0]?.value ?? 0;
    expect(outputAfter - outputBefore).toBe(record.output_tokens);
  });
});

describe("a runtime that dies mid-stream", () => {
  it("ends the stream with the gateway's own response.failed, numbered on, and bills nothing", async () => {
    // Two well-formed events, then the connection drops: a runtime process that died.
    const runtime = await standInRuntime(p, "dying", (res) => {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
      const frame = (type: string, n: number) =>
        `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n })}\n\n`;
      res.write(frame("response.created", 0) + frame("response.in_progress", 1));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    try {
      const raw = JSON.stringify({ model: "dying", input: "Hi", stream: true });
      const { response, text } = await rawPost("/v1/responses", raw, {
        "x-api-key": p.keys.acme.key,
      });
      expect(response.statusCode).toBe(200);
      const events = parseEventStream(text);
      expect(events.map((e) => e.data.type)).toEqual([
        "response.created",
        "response.in_progress",
        "response.failed",
      ]);
      const failed = streamedResponseSchema.parse(events[2]!.data.response);
      expect(events[2]!.data.sequence_number).toBe(2);
      expect(failed.status).toBe("failed");
      expect(failed.error?.code).toBe("upstream_error");
      expect(failed.usage).toBeNull();
      // Nothing known, nothing billed: give the outbox time to deliver, then look.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(p.sink.counted.has(failed.id)).toBe(false);
    } finally {
      await runtime.close();
    }
  });
});

describe("a runtime that dies while answering a stream request with an error", () => {
  it("answers 502 upstream_error, not 503 store_unavailable: the store was never involved", async () => {
    // The runtime's error status and part of its body, then the connection
    // drops: a runtime killed while refusing. The socket error's code
    // (ECONNRESET) once reached the app's error handler bare, which reads
    // socket codes as the database being unreachable.
    const runtime = await standInRuntime(p, "refusing-dies", (res) => {
      res.writeHead(503, { "content-type": "application/json", "content-length": "200" });
      res.write('{"error":{"mess');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    try {
      const raw = JSON.stringify({ model: "refusing-dies", input: "Hi", stream: true });
      const { response, text } = await rawPost("/v1/responses", raw, {
        "x-api-key": p.keys.acme.key,
      });
      expect(response.statusCode).toBe(502);
      expect(response.headers["content-type"]).toMatch(/^application\/json/);
      const body = JSON.parse(text) as { error: { code: string; type: string } };
      expect(body.error.code).toBe("upstream_error");
      expect(body.error.type).toBe("server_error");
    } finally {
      await runtime.close();
    }
  });
});

describe("a runtime whose writes split its frames", () => {
  it("relays every byte as the runtime sent it, a frame or a character cut between writes included", async () => {
    const delta = (n: number, text: string) =>
      sseFrame({
        type: "response.output_text.delta",
        sequence_number: n,
        item_id: "msg_1",
        output_index: 0,
        content_index: 0,
        delta: text,
        logprobs: [],
      });
    const start =
      `event: response.created\ndata: ${JSON.stringify({ type: "response.created", sequence_number: 0 })}\n\n` +
      `event: response.in_progress\ndata: ${JSON.stringify({ type: "response.in_progress", sequence_number: 1 })}\n\n`;
    const first = Buffer.from(delta(2, "vague 🌊"));
    const second = Buffer.from(delta(3, " écume"));
    const third = Buffer.from(delta(4, " fin"));
    const waveAt = first.indexOf(Buffer.from("🌊"));
    const request = textGenerationRequestSchema.parse({ model: "pieces", input: "Hi" });
    const terminal = sseFrame({
      type: "response.completed",
      sequence_number: 5,
      response: completedResponse(request, {
        text: "vague 🌊 écume fin",
        inputTokens: 2,
        outputTokens: 3,
        incompleteReason: null,
        createdAt: 1,
        completedAt: 2,
      }),
    });
    // Whole frames; a frame cut inside its emoji; one cut between its lines and
    // joined to the next; then the terminal event.
    const pieces = [
      Buffer.from(start),
      first.subarray(0, waveAt + 2),
      first.subarray(waveAt + 2),
      second.subarray(0, 20),
      Buffer.concat([second.subarray(20), third]),
      Buffer.from(terminal),
    ];
    const runtime = await standInRuntime(p, "pieces", (res) => {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
      let i = 0;
      const next = () => {
        if (i === pieces.length) return res.end();
        res.write(pieces[i++]);
        setTimeout(next, 15);
      };
      next();
    });
    try {
      const raw = JSON.stringify({ model: "pieces", input: "Hi", stream: true });
      const { response, text } = await rawPost("/v1/responses", raw, {
        "x-api-key": p.keys.acme.key,
      });
      expect(response.statusCode).toBe(200);
      const before = Buffer.concat([Buffer.from(start), first, second, third]).toString("utf8");
      expect(text.startsWith(before)).toBe(true);
      const events = parseEventStream(text);
      expect(events.map((e) => e.data.type)).toEqual([
        "response.created",
        "response.in_progress",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.completed",
      ]);
      expect(deltasOf(events)).toBe("vague 🌊 écume fin");
    } finally {
      await runtime.close();
    }
  });
});
