import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatResetDuration } from "../../../gateway/rate-limit/rate-limit-headers.js";
import { GEN, read } from "../conformance/support.js";
import { parseEventStream } from "../../support/sse-events.js";
import { startPlatform, type Platform } from "../support/platform.js";

describe("formatResetDuration", () => {
  it("writes durations as the OpenAI API does", () => {
    expect(
      [0, 0.2, 120, 999, 1000, 1500, 59_999, 60_000, 360_000, 3_723_000].map(formatResetDuration),
    ).toEqual(["0s", "1ms", "120ms", "999ms", "1s", "1.5s", "59.999s", "1m0s", "6m0s", "1h2m3s"]);
  });
});

const REQUEST_HEADERS = [
  "x-ratelimit-limit-requests",
  "x-ratelimit-remaining-requests",
  "x-ratelimit-reset-requests",
];
const TOKEN_HEADERS = [
  "x-ratelimit-limit-tokens",
  "x-ratelimit-remaining-tokens",
  "x-ratelimit-reset-tokens",
];

/**
 * The rate-limit headers on real answers of the in-process limiter (the
 * Valkey one is checked in test/gateway/shared-state/replicas.test.ts). The
 * default token limit is 300 a minute (5 a second); tiny-gpt's 256-token
 * limit, which its input and output share, is what a request reserves.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform({ config: { rateLimitTokensPerMinute: 300 } });
});
afterAll(async () => p?.close());

/** About a hundred tokens: a request that uses enough that a second reservation of 256 cannot fit. */
const LONG = "The quick brown fox jumps over the lazy dog. ".repeat(10);

const headersOf = (headers: Headers, names: string[]) => names.map((name) => headers.get(name));

describe("x-ratelimit-* headers", () => {
  it("a 200 and a 429 of the requests limit carry the request and token headers", async () => {
    const key = p.keys.limited.key; // its own limit: 60 a minute, burst 2
    const first = await read(p.api(GEN, { key }));
    expect(first.status).toBe(200);
    expect(headersOf(first.headers, REQUEST_HEADERS)).toEqual(["2", "1", "1s"]);
    // The token headers tell the balance after this request's reservation.
    expect(first.headers.get("x-ratelimit-limit-tokens")).toBe("300");
    expect(Number(first.headers.get("x-ratelimit-remaining-tokens"))).toBeLessThanOrEqual(
      300 - 256,
    );
    expect(first.headers.get("x-ratelimit-reset-tokens")).toMatch(/^\d+(\.\d+)?s$/);

    expect((await read(p.api(GEN, { key }))).status).toBe(200);
    const refused = await read(p.api(GEN, { key }));
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
    expect(headersOf(refused.headers, REQUEST_HEADERS).slice(0, 2)).toEqual(["2", "0"]);
    // Two requests spent at one a second: full again within 2 s.
    const reset = refused.headers.get("x-ratelimit-reset-requests")!;
    expect(reset).toMatch(/^(\d+ms|1(\.\d+)?s|2s)$/);
    for (const name of TOKEN_HEADERS) expect(refused.headers.get(name)).not.toBeNull();
  });

  it("a token reservation is settled with the used count; one that does not fit is a 429", async () => {
    // 256 of 300 reserved: admitted.
    const body = { ...GEN, input: LONG, max_output_tokens: 40 };
    const first = await read(p.api(body));
    expect(first.status).toBe(200);
    expect(Number(first.headers.get("x-ratelimit-remaining-tokens"))).toBeLessThanOrEqual(44 + 5);
    const usage = first.body.usage as { input_tokens: number; output_tokens: number };
    const used = usage.input_tokens + usage.output_tokens;
    expect(used).toBeGreaterThan(44 + 10);
    expect(used).toBeLessThanOrEqual(256);
    // The settlement gives back what was not used (it runs as the answer leaves).
    await new Promise((r) => setTimeout(r, 50));
    const second = await read(p.api(body));
    expect(second.status).toBe(429);
    const remaining = Number(second.headers.get("x-ratelimit-remaining-tokens"));
    // 300 minus what the first used, plus at most a few seconds' refill at 5 a second.
    expect(remaining).toBeGreaterThanOrEqual(300 - used);
    expect(remaining).toBeLessThan(300 - used + 10);
    const retryAfter = Number(second.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(Math.floor((256 - remaining) / 5));
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil((256 - remaining) / 5) + 1);
  });

  it("a stream keeps its reservation until it ends, then settles with its last event's usage", async () => {
    // Another key, so the bucket starts full: 300 tokens.
    const key = p.keys.acmeWeb.key;
    const body = { ...GEN, input: LONG, max_output_tokens: 40 };
    const streamed = await p.api({ ...body, stream: true }, { key });
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get("content-type")).toMatch(/^text\/event-stream/);
    // Reserved as the stream starts: 256 of 300 held.
    expect(Number(streamed.headers.get("x-ratelimit-remaining-tokens"))).toBeLessThanOrEqual(
      44 + 5,
    );
    const events = parseEventStream(await streamed.text());
    const last = events.at(-1)!.data as unknown as { response: { usage: Record<string, number> } };
    const used = last.response.usage.input_tokens! + last.response.usage.output_tokens!;
    expect(used).toBeGreaterThan(44 + 10);
    expect(used).toBeLessThanOrEqual(256);
    await new Promise((r) => setTimeout(r, 50));
    // Settled with what the stream used, not given back whole as its headers left.
    const second = await read(p.api(body, { key }));
    expect(second.status).toBe(429);
    const remaining = Number(second.headers.get("x-ratelimit-remaining-tokens"));
    expect(remaining).toBeGreaterThanOrEqual(300 - used);
    expect(remaining).toBeLessThan(300 - used + 10);
  });

  it("a max_output_tokens past the model's limit reserves no more than the limit", async () => {
    const answer = await read(
      p.api({ ...GEN, max_output_tokens: 2_147_483_647 }, { key: p.keys.admin.key }),
    );
    expect(answer.status).toBe(200);
    // Input and output share tiny-gpt's 256: nothing can use more.
    expect(Number(answer.headers.get("x-ratelimit-remaining-tokens"))).toBe(300 - 256);
  });

  it("the payment route carries them for the signing kid", async () => {
    const answer = await read(p.pay(GEN, { headers: { "pay-agent-id": "agent-h" } }));
    expect(answer.status).toBe(200);
    for (const name of [...REQUEST_HEADERS, ...TOKEN_HEADERS]) {
      expect(answer.headers.get(name)).not.toBeNull();
    }
    expect(answer.headers.get("x-ratelimit-limit-requests")).toBe("100000");
  });

  it("the OpenAPI document lists them on the 200 and the 429 of both routes", async () => {
    const document = (await (await fetch(`${p.url}/openapi.json`)).json()) as {
      paths: Record<string, { post: { responses: Record<string, { headers?: object }> } }>;
    };
    for (const path of ["/v1/responses", "/pay/v1/responses"]) {
      for (const status of ["200", "429"]) {
        const headers = Object.keys(document.paths[path]!.post.responses[status]!.headers ?? {});
        expect(headers).toEqual(expect.arrayContaining([...REQUEST_HEADERS, ...TOKEN_HEADERS]));
      }
    }
  });
});
