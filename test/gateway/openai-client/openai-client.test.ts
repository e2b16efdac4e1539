import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey } from "../../../gateway/auth/key-format.js";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * The gateway driven as users drive it: the official `openai` client with
 * its `baseURL` pointed at `/v1`. The client authenticates with
 * `Authorization: Bearer`, which the gateway accepts as an alias of
 * x-api-key, and maps statuses to its own error classes, so these tests pin
 * what a user of the SDK sees: the Response object, the error classes with
 * our message/param/code, and retries paced by our Retry-After.
 */

interface Attempt {
  status: number;
  startedAt: number;
  endedAt: number;
  retryAfter: string | null;
  headers: Headers;
}

/** A client whose every HTTP attempt is recorded (its retries included). */
function recordingClient(
  p: Platform,
  apiKey: string,
  options: { maxRetries?: number; timeout?: number } = {},
): { client: OpenAI; attempts: Attempt[] } {
  const attempts: Attempt[] = [];
  const client = new OpenAI({
    apiKey,
    baseURL: `${p.url}/v1`,
    maxRetries: options.maxRetries ?? 0,
    timeout: options.timeout ?? 10_000,
    fetch: async (url: string | URL | Request, init?: RequestInit) => {
      const startedAt = performance.now();
      const res = await fetch(url, init);
      attempts.push({
        status: res.status,
        startedAt,
        endedAt: performance.now(),
        retryAfter: res.headers.get("retry-after"),
        headers: new Headers(init?.headers),
      });
      return res;
    },
  });
  return { client, attempts };
}

const HELLO = { model: "tiny-gpt", input: "Hello", max_output_tokens: 8, temperature: 0 } as const;

let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

describe("the openai client against /v1/responses", () => {
  it("gets a Response with output_text, usage and resp_/msg_ ids", async () => {
    const { client, attempts } = recordingClient(p, p.keys.acme.key);
    const response = await client.responses.create(HELLO);

    expect(response.object).toBe("response");
    expect(response.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(response.model).toBe("tiny-gpt");
    expect(["completed", "incomplete"]).toContain(response.status);
    const message = response.output[0];
    expect(message).toMatchObject({ type: "message", role: "assistant" });
    expect(message?.type === "message" && message.id).toMatch(/^msg_/);
    // output_text is the SDK's own convenience: the concatenated output_text parts.
    const part = message?.type === "message" ? message.content[0] : undefined;
    expect(part?.type).toBe("output_text");
    expect(response.output_text).toBe(part?.type === "output_text" ? part.text : null);
    expect(response.usage!.input_tokens).toBeGreaterThan(0);
    expect(response.usage!.output_tokens).toBeGreaterThan(0);
    expect(response.usage!.output_tokens).toBeLessThanOrEqual(8);
    expect(response.usage!.total_tokens).toBe(
      response.usage!.input_tokens + response.usage!.output_tokens,
    );
    // The SDK exposes our x-request-id as the request id.
    expect(response._request_id).toMatch(/^req_/);

    // What made it work: the SDK's Bearer header, no x-api-key.
    expect(attempts).toHaveLength(1);
    expect(attempts[0]!.headers.get("authorization")).toBe(`Bearer ${p.keys.acme.key}`);
    expect(attempts[0]!.headers.get("x-api-key")).toBeNull();
  });

  it("round-trips instructions and metadata", async () => {
    const { client } = recordingClient(p, p.keys.acme.key);
    const response = await client.responses.create({
      ...HELLO,
      instructions: "Answer in one word.",
      metadata: { ticket: "T-1234", team: "search" },
    });
    expect(response.instructions).toBe("Answer in one word.");
    expect(response.metadata).toEqual({ ticket: "T-1234", team: "search" });
    expect(response.max_output_tokens).toBe(8);
    expect(response.temperature).toBe(0);
  });

  it.each([
    { guards: "an unknown key", key: () => generateApiKey().key },
    { guards: "a revoked key", key: () => p.keys.revoked.key },
    { guards: "a key that is not one of ours", key: () => "sk-not-a-modelgate-key" },
  ])("throws AuthenticationError (401) for $guards, without retrying", async ({ key }) => {
    const { client, attempts } = recordingClient(p, key(), { maxRetries: 2 });
    const error = await client.responses.create(HELLO).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error).toMatchObject({
      status: 401,
      code: "invalid_api_key",
      type: "authentication_error",
    });
    expect(attempts).toHaveLength(1);
  });

  it.each([
    {
      guards: "text.format json (rejected by the spec)",
      body: { ...HELLO, text: { format: { type: "json" } } },
      param: "text.format.type",
      code: "invalid_request",
      message: /`json` is currently rejected/,
    },
    {
      guards: "an unknown model",
      body: { ...HELLO, model: "no-such-model" },
      param: "model",
      code: "model_not_found",
      message: /'no-such-model' does not exist/,
    },
    {
      guards: "an empty input",
      body: { ...HELLO, input: "" },
      param: "input",
      code: "invalid_request",
      message: /input must not be empty/,
    },
  ])("throws BadRequestError with our message, param and code for $guards", async (c) => {
    const { client, attempts } = recordingClient(p, p.keys.acme.key, { maxRetries: 2 });
    // The SDK's types forbid text.format.type "json"; the cast sends it anyway, as a JS user could.
    const params = c.body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming;
    const error = await client.responses.create(params).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    const bad = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(bad.status).toBe(400);
    expect(bad.param).toBe(c.param);
    expect(bad.code).toBe(c.code);
    expect(bad.type).toBe("invalid_request_error");
    expect(bad.message).toMatch(c.message);
    // Never retried (spec section 7: do not retry a 400).
    expect(attempts).toHaveLength(1);
  });

  it("takes a conversation as a list of message items, as the client types it", async () => {
    const { client } = recordingClient(p, p.keys.acme.key);
    const asString = await client.responses.create(HELLO);
    const asList = await client.responses.create({
      ...HELLO,
      input: [{ role: "user", content: [{ type: "input_text", text: "Hello" }] }],
    });
    expect(asList.output_text).toBe(asString.output_text);
    // The prompt again: the runtime's prefix cache may hold it, so cached_tokens may differ.
    expect({ ...asList.usage, input_tokens_details: null }).toEqual({
      ...asString.usage,
      input_tokens_details: null,
    });
    const conversation = await client.responses.create({
      ...HELLO,
      input: [
        { role: "developer", content: "Answer briefly." },
        { role: "user", content: "Hello" },
        { role: "assistant", content: asString.output_text },
        { role: "user", content: "And again?" },
      ],
    });
    expect(conversation.usage!.input_tokens).toBeGreaterThan(asString.usage!.input_tokens);
  });

  it("streams with stream: true: events ending in response.completed or incomplete (test/gateway/streaming has the rest)", async () => {
    const { client } = recordingClient(p, p.keys.acme.key, { timeout: 5_000 });
    const types: string[] = [];
    for await (const event of await client.responses.create({ ...HELLO, stream: true })) {
      types.push(event.type);
    }
    expect(types[0]).toBe("response.created");
    expect(["response.completed", "response.incomplete"]).toContain(types.at(-1));
  });
});

describe("the openai client and stored responses", () => {
  it("creates, retrieves, lists input items, continues with previous_response_id, cannot cancel, and deletes", async () => {
    const { client } = recordingClient(p, p.keys.acme.key);
    const first = await client.responses.create({ ...HELLO, input: "The capital of France is" });
    // Right after the create returns, as the client's own tests do.
    const retrieved = await client.responses.retrieve(first.id);
    expect(retrieved.id).toBe(first.id);
    expect(retrieved.output_text).toBe(first.output_text);
    expect(retrieved.usage).toEqual(first.usage);

    const items = [];
    for await (const item of client.responses.inputItems.list(first.id)) items.push(item);
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: "The capital of France is" }],
    });

    const second = await client.responses.create({
      ...HELLO,
      input: "And Germany?",
      previous_response_id: first.id,
    });
    expect(second.previous_response_id).toBe(first.id);
    const whole = await client.responses.create({
      ...HELLO,
      store: false,
      input: [
        { role: "user", content: "The capital of France is" },
        { role: "assistant", content: first.output_text },
        { role: "user", content: "And Germany?" },
      ],
    });
    expect(second.usage?.input_tokens).toBe(whole.usage?.input_tokens);
    expect(second.output_text).toBe(whole.output_text);

    // Nothing runs in the background here, so nothing is left to cancel.
    const cancel = await client.responses.cancel(first.id).catch((error: unknown) => error);
    expect(cancel).toBeInstanceOf(OpenAI.BadRequestError);
    expect((cancel as InstanceType<typeof OpenAI.BadRequestError>).code).toBe(
      "response_not_cancellable",
    );

    await client.responses.delete(first.id);
    const gone = await client.responses.retrieve(first.id).catch((error: unknown) => error);
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
    expect((gone as InstanceType<typeof OpenAI.NotFoundError>).message).toContain(first.id);
    const orphan = await client.responses
      .create({ ...HELLO, input: "Hi", previous_response_id: first.id })
      .catch((error: unknown) => error);
    expect(orphan).toBeInstanceOf(OpenAI.NotFoundError);
    expect((orphan as InstanceType<typeof OpenAI.NotFoundError>).param).toBe(
      "previous_response_id",
    );
  });
});

describe("the openai client and our 429 (key limited to burst 2, 1 request/s)", () => {
  /** Spends the limited key's bucket until a 429 says it is empty. */
  async function drain(): Promise<void> {
    const { client } = recordingClient(p, p.keys.limited.key);
    for (let i = 0; i < 10; i += 1) {
      const error = await client.responses.create(HELLO).catch((e: unknown) => e);
      if (error instanceof OpenAI.RateLimitError) return;
    }
    throw new Error("the limited key was never rate limited");
  }

  it("throws RateLimitError with Retry-After when retries are off", async () => {
    await drain();
    const { client, attempts } = recordingClient(p, p.keys.limited.key, { maxRetries: 0 });
    const error = await client.responses.create(HELLO).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const limited = error as InstanceType<typeof OpenAI.RateLimitError>;
    expect(limited.status).toBe(429);
    expect(limited.code).toBe("rate_limit_exceeded");
    expect(limited.headers?.get("retry-after")).toMatch(/^[1-9]\d*$/);
    expect(attempts).toHaveLength(1);
  });

  it("retries after exactly our Retry-After and then succeeds", async () => {
    await drain();
    // Three at once on an empty bucket: at least two are refused and must wait.
    const clients = [0, 1, 2].map(() =>
      recordingClient(p, p.keys.limited.key, { maxRetries: 4, timeout: 20_000 }),
    );
    const responses = await Promise.all(
      clients.map(({ client }) => client.responses.create(HELLO)),
    );
    for (const response of responses) expect(response.id).toMatch(/^resp_/);

    const all = clients.flatMap(({ attempts }) => attempts);
    expect(all.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(2);
    for (const { attempts } of clients) {
      expect(attempts.at(-1)!.status).toBe(200);
      for (let i = 1; i < attempts.length; i += 1) {
        const refused = attempts[i - 1]!;
        expect(refused.status).toBe(429);
        // The SDK's own backoff would be ~0.5 s; our header says how long, and it is honoured.
        const waitedMs = attempts[i]!.startedAt - refused.endedAt;
        expect(waitedMs).toBeGreaterThanOrEqual(Number(refused.retryAfter) * 1000 - 5);
      }
    }
  });
});
