import { parseDictionary } from "structured-headers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import {
  errorOf,
  GEN,
  NLI,
  post,
  read,
  startBrokenGateway,
  until,
  type BrokenGateway,
  type Json,
} from "./support.js";

/**
 * Spec 4.1 and 4.2: what each endpoint takes and answers, and the response
 * headers: `x-request-id` on every response (errors of every status too),
 * `x-inference-type: cloud` when a runtime answered, and `pay-usage` on the
 * payment route's 200s only, in its documented RFC 8941 form.
 */
let p: Platform;
let broken: BrokenGateway;
beforeAll(async () => {
  p = await startPlatform();
  broken = await startBrokenGateway(p);
});
afterAll(async () => {
  await broken?.close();
  await p?.close();
});

type Send = (headers: Record<string, string>) => Promise<Response>;

const LONG_INPUT = "x".repeat(400);

/** One way to get each status the gateway answers, on either route. */
const BY_STATUS: Array<[string, number, Send]> = [
  ["200 api-key", 200, (h) => p.api(GEN, { headers: h })],
  ["200 api-key classifier", 200, (h) => p.api(NLI, { headers: h })],
  ["200 pay", 200, (h) => p.pay(GEN, { headers: h })],
  ["400 api-key", 400, (h) => p.api({ model: "tiny-gpt" }, { headers: h })],
  ["400 pay", 400, (h) => p.pay({ model: "tiny-gpt" }, { headers: h })],
  ["401 api-key", 401, (h) => p.api(GEN, { key: null, headers: h })],
  ["401 pay", 401, (h) => p.pay(GEN, { signature: null, headers: h })],
  [
    "402 pay (stale signature)",
    402,
    (h) => p.pay(GEN, { headers: h, t: Math.floor(Date.now() / 1000) - 3600 }),
  ],
  [
    "402 pay (allowance denied)",
    402,
    async (h) => {
      await p.provider.setMode("deny", "check");
      try {
        return await p.pay(GEN, { headers: h });
      } finally {
        await p.provider.setMode("allow");
      }
    },
  ],
  ["403 api-key", 403, (h) => p.api(GEN, { headers: { ...h, "x-project-id": "lab" } })],
  ["404 unknown path", 404, (h) => post(p.url, "/v2/responses", GEN, h)],
  ["408 api-key", 408, (h) => p.api({ model: "hung", input: "x" }, { headers: h })],
  ["420 api-key", 420, (h) => p.api({ ...GEN, input: LONG_INPUT }, { headers: h })],
  ["420 pay", 420, (h) => p.pay({ ...GEN, input: LONG_INPUT }, { headers: h })],
  [
    "429 api-key",
    429,
    async (h) => {
      const key = p.keys.limited.key;
      await p.api(GEN, { key });
      await p.api(GEN, { key });
      return p.api(GEN, { key, headers: h });
    },
  ],
  [
    "500 api-key",
    500,
    (h) => post(broken.url, "/v1/responses", GEN, { "x-api-key": p.keys.acme.key, ...h }),
  ],
  [
    "500 pay",
    500,
    (h) => {
      const raw = JSON.stringify(GEN);
      return post(broken.url, "/pay/v1/responses", raw, { "pay-signature": p.sign(raw), ...h });
    },
  ],
  ["502 api-key", 502, (h) => p.api({ model: "refused", input: "x" }, { headers: h })],
  ["503 api-key", 503, (h) => p.api({ model: "no-endpoint", input: "x" }, { headers: h })],
  ["503 pay", 503, (h) => p.pay({ model: "no-endpoint", input: "x" }, { headers: h })],
];

describe("4.2 · x-request-id is present on every response", () => {
  it.each(BY_STATUS)("4.2 · x-request-id · %s echoes the caller's id", async (_n, status, send) => {
    const id = `conf-${status}-${Math.random().toString(36).slice(2)}`;
    const answer = await read(send({ "x-request-id": id }));
    expect(answer.status).toBe(status);
    expect(answer.headers.get("x-request-id")).toBe(id);
  });

  it.each(BY_STATUS)(
    "4.2 · x-request-id · %s has a new id when none is sent",
    async (_n, status, send) => {
      const answer = await read(send({}));
      expect(answer.status).toBe(status);
      expect(answer.headers.get("x-request-id")).toMatch(/^\S{8,}$/);
    },
  );

  it.each<[string, string]>([
    ["with a space", "has a space"],
    ["over 128 characters", "a".repeat(129)],
    ["with a slash", "a/b"],
    ["with a semicolon", "a;b"],
    ["with non-ASCII", "caf\u00e9"],
    ["empty", ""],
  ])("4.2 · x-request-id · an unsafe caller id (%s) is replaced by a new one", async (_n, id) => {
    // Header values travel as bytes: non-ASCII goes out as its UTF-8 bytes.
    const sent = Buffer.from(id, "utf8").toString("latin1");
    const answer = await read(
      fetch(`${p.url}/v1/responses`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-api-key": p.keys.acme.key,
          "x-request-id": sent,
        },
        body: JSON.stringify(GEN),
      }),
    );
    expect(answer.status).toBe(200);
    const got = answer.headers.get("x-request-id") ?? "";
    expect(got).toMatch(/^\S{8,}$/);
    expect(got).not.toBe(sent);
  });

  it.each<[string, string, number, string]>([
    // No id is over the router's 100 characters: nothing is there.
    ["an id of 101 characters", `/v1/responses/resp_${"a".repeat(96)}`, 404, "not_found"],
    ["a malformed percent-encoding", "/v1/responses/resp_%E0%A4%A", 400, "invalid_request"],
  ])(
    "4.2 · x-request-id · a path the router refuses (%s) is answered in the envelope, with an id",
    async (_n, path, status, code) => {
      const answer = await read(
        fetch(`${p.url}${path}`, { headers: { "x-api-key": p.keys.acme.key } }),
      );
      expect(answer.status).toBe(status);
      expect(answer.headers.get("x-request-id")).toMatch(/^\S{8,}$/);
      expect(Object.keys(answer.body)).toEqual(["error"]);
      expect(errorOf(answer.body)).toMatchObject({ code, type: "invalid_request_error" });
    },
  );

  it("4.2 · x-request-id · new ids are distinct per request", async () => {
    const ids = await Promise.all(
      [1, 2, 3].map(async () => (await p.api(GEN)).headers.get("x-request-id")),
    );
    expect(new Set(ids).size).toBe(3);
  });
});

describe("4.2 · x-inference-type", () => {
  it.each(BY_STATUS.filter(([, status]) => status === 200))(
    "4.2 · x-inference-type · %s says cloud",
    async (_n, _status, send) => {
      const answer = await read(send({}));
      expect(answer.status).toBe(200);
      expect(answer.headers.get("x-inference-type")).toBe("cloud");
    },
  );

  it.each(
    BY_STATUS.filter(([, status]) =>
      [400, 401, 402, 403, 404, 420, 429, 502, 503].includes(status),
    ),
  )("4.2 · x-inference-type · absent when no inference ran: %s", async (_n, status, send) => {
    const answer = await read(send({}));
    expect(answer.status).toBe(status);
    expect(answer.headers.get("x-inference-type")).toBeNull();
  });
});

describe("4.2 · pay-usage", () => {
  it("4.2 · pay-usage · on a 200: the documented RFC 8941 form with the body's usage and the model's slug", async () => {
    const answer = await read(p.pay(GEN));
    expect(answer.status).toBe(200);
    const header = answer.headers.get("pay-usage") ?? "";
    expect(header).toMatch(/^slug="tiny-gpt", input_tokens=\d+, output_tokens=\d+$/);
    const dictionary = parseDictionary(header);
    const usage = answer.body.usage as Json;
    expect(dictionary.get("slug")?.[0]).toBe("tiny-gpt");
    expect(dictionary.get("input_tokens")?.[0]).toBe(usage.input_tokens);
    expect(dictionary.get("output_tokens")?.[0]).toBe(usage.output_tokens);
  });

  it("4.2 · pay-usage · is what is settled with the payment provider", async () => {
    const answer = await read(p.pay(GEN));
    expect(answer.status).toBe(200);
    const id = answer.headers.get("x-request-id") ?? "";
    const dictionary = parseDictionary(answer.headers.get("pay-usage") ?? "");
    await until("the settlement", () =>
      p.provider.ledger.settlements.some((s) => s.requestId === id),
    );
    const settled = p.provider.ledger.settlements.filter((s) => s.requestId === id);
    expect(settled).toHaveLength(1);
    const member = (name: string): unknown => dictionary.get(name)?.[0];
    expect(settled[0]).toMatchObject({
      serviceSlug: member("slug"),
      inputTokens: member("input_tokens"),
      outputTokens: member("output_tokens"),
    });
  });

  it("4.2 · pay-usage · on a classifier 200: the input tokens metered and 0 output tokens", async () => {
    const answer = await read(p.pay(NLI));
    expect(answer.status).toBe(200);
    const header = answer.headers.get("pay-usage") ?? "";
    expect(header).toMatch(/^slug="[^"]+", input_tokens=\d+, output_tokens=0$/);
    const dictionary = parseDictionary(header);
    expect(dictionary.get("input_tokens")?.[0] as number).toBeGreaterThan(0);
  });

  it.each(BY_STATUS.filter(([name, status]) => name.includes("pay") && status !== 200))(
    "4.2 · pay-usage · absent on an error: %s",
    async (_n, status, send) => {
      const answer = await read(send({}));
      expect(answer.status).toBe(status);
      expect(answer.headers.get("pay-usage")).toBeNull();
    },
  );

  it("4.2 · pay-usage · absent on the API-key route (billed by subscription, not the provider)", async () => {
    const answer = await read(p.api(GEN));
    expect(answer.status).toBe(200);
    expect(answer.headers.get("pay-usage")).toBeNull();
  });
});

describe("4.1 / 4.2 · bodies in and out", () => {
  it.each<[string, () => Promise<Response>]>([
    ["4.1 · 200 out: a ResponsesResponse for a general model", () => p.api(GEN)],
    ["4.2 · 200 out: a ResponsesResponse for a general model", () => p.pay(GEN)],
  ])("%s", async (_n, send) => {
    const answer = await read(send());
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
    expect(answer.body.object).toBe("response");
  });

  it.each<[string, () => Promise<Response>]>([
    ["4.1 · 200 out: the label-to-score object for a zero-shot classifier", () => p.api(NLI)],
    ["4.2 · 200 out: the label-to-score object for a zero-shot classifier", () => p.pay(NLI)],
  ])("%s", async (_n, send) => {
    const answer = await read(send());
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.body).sort()).toEqual([...NLI.categories].sort());
  });

  it("4.1 · x-project-id is optional: the same request with and without it succeeds", async () => {
    expect((await p.api(GEN)).status).toBe(200);
    expect((await p.api(GEN, { headers: { "x-project-id": "batch" } })).status).toBe(200);
  });

  it("4.2 · same routing as /v1/responses: the same request gives the same echo on both routes", async () => {
    const body = { ...GEN, instructions: "Be brief", metadata: { team: "core" } };
    const [api, pay] = await Promise.all([read(p.api(body)), read(p.pay(body))]);
    // cached_tokens too: whichever of the two the runtime finished first may feed the other's prefix.
    const strip = (b: Json) => {
      const { id: _i, created_at: _c, completed_at: _d, output: _o, usage, ...rest } = b;
      return { ...rest, usage: { ...(usage as Json), input_tokens_details: null } };
    };
    expect(strip(pay.body)).toEqual(strip(api.body));
  });

  it("4.2 · pay-request-id and pay-agent-id are optional: a request with both succeeds", async () => {
    const answer = await read(
      p.pay(GEN, { headers: { "pay-request-id": "pr-1", "pay-agent-id": "agent-1" } }),
    );
    expect(answer.status).toBe(200);
  });
});
