import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { generateApiKey, KEY_PREFIX } from "../../../gateway/auth/key-format.js";
import { startPlatform, type Platform } from "../support/platform.js";
import {
  footprint,
  logLinesContaining,
  rawExchange,
  rawPost,
  utf8OnTheWire,
  type Footprint,
} from "./support.js";

/**
 * What a hostile or careless request must not do to the gateway: overflow
 * its body limit, forge or flood its logs through headers, leak credentials
 * into logs, crash it with deep JSON, pollute prototypes, or slip bytes that
 * are not UTF-8 past the JSON parser.
 */

const BODY = { model: "tiny-gpt", input: "Hello", max_output_tokens: 2, temperature: 0 };
const RAW = JSON.stringify(BODY);
/**
 * A paid body never sent before: a payment signature is accepted once, so
 * each paid request of these suites signs a body of its own.
 */
let paidBodies = 0;
const freshPaidBody = () => JSON.stringify({ ...BODY, metadata: { n: String(++paidBodies) } });
const GENERATED_ID = /^req_[0-9a-f]{32}$/;

let p: Platform;
let before: Footprint;

beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());
beforeEach(async () => {
  before = await footprint(p);
});

interface FailedEnvelope {
  object: string;
  status: string;
  error: { message: string; type: string; param: string | null; code: string };
  metadata: Record<string, string>;
  max_output_tokens: number | null;
}

/** Each write of the logger is exactly one JSON object on one line: nothing a header could split or forge. */
function expectEveryLogLineIsOneJsonObject(): void {
  for (const line of p.logLines) {
    expect(line.endsWith("\n"), line).toBe(true);
    expect(/[\r\n\u2028\u2029]/.test(line.slice(0, -1)), line).toBe(false);
    const parsed: unknown = JSON.parse(line);
    expect(typeof parsed === "object" && parsed !== null && !Array.isArray(parsed), line).toBe(
      true,
    );
  }
}

function payHeaders(raw: string | Buffer, extra: Record<string, string> = {}) {
  return { "pay-signature": p.sign(raw), ...extra };
}

describe("body size", () => {
  const huge = JSON.stringify({ ...BODY, input: "x".repeat(2 * 1024 * 1024) });

  it.each([
    { route: "/v1/responses", send: () => p.api(huge) },
    { route: "/pay/v1/responses", send: () => p.pay(huge) },
  ])(
    "answers a 2 MiB body on $route with a 413 envelope that names the limit",
    async ({ send }) => {
      const res = await send();
      expect(res.status).toBe(413);
      const body = (await res.json()) as FailedEnvelope;
      expect(body).toMatchObject({
        object: "response",
        status: "failed",
        error: { type: "invalid_request_error", code: "request_too_large" },
      });
      // The caller must learn what to aim for: the configured limit, 1 MiB.
      expect(body.error.message).toMatch(/\b1048576 bytes\b|\b1 MiB\b/);
      expect(await footprint(p)).toEqual(before);
    },
  );
});

describe("who called, in the logs", () => {
  it("puts the key's id and account on a served request's completion line, never the key", async () => {
    const res = await p.api(BODY, { headers: { "x-request-id": "who-called-1" } });
    expect(res.status).toBe(200);
    const done = logLinesContaining(p, "who-called-1").filter((l) =>
      l.includes('"request completed"'),
    );
    expect(done).toHaveLength(1);
    expect(JSON.parse(done[0]!)).toMatchObject({
      keyId: p.keys.acme.id,
      account: "acme",
      statusCode: 200,
    });
    expect(logLinesContaining(p, p.keys.acme.key)).toEqual([]);
  });

  it("puts them on a refused request's line too", async () => {
    const res = await p.api(
      { ...BODY, temperature: 9 },
      { headers: { "x-request-id": "who-called-2" } },
    );
    expect(res.status).toBe(400);
    const refused = logLinesContaining(p, "who-called-2").filter((l) =>
      l.includes('"request refused"'),
    );
    expect(refused).toHaveLength(1);
    expect(JSON.parse(refused[0]!)).toMatchObject({ keyId: p.keys.acme.id, account: "acme" });
  });
});

describe("x-request-id from the caller", () => {
  it("echoes and logs a sane id unchanged (the control for the cases below)", async () => {
    const res = await p.api(BODY, { headers: { "x-request-id": "client-trace-42" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe("client-trace-42");
    expect(logLinesContaining(p, "client-trace-42").length).toBeGreaterThan(0);
  });

  // Each value carries a unique ASCII marker: JSON escaping cannot hide it from a text search.
  it.each([
    { guards: "a tab", value: "INJRID1\tforged" },
    { guards: "percent-encoded CR/LF", value: 'INJRID2%0d%0a{"level":60}' },
    { guards: "a literal backslash-n", value: "INJRID3\\nforged" },
    { guards: "quotes and spaces", value: 'INJRID4 "quoted" value' },
    { guards: "U+2028 LINE SEPARATOR (raw UTF-8 bytes)", value: utf8OnTheWire("INJRID5\u2028x") },
    { guards: "U+0085 NEXT LINE (raw UTF-8 bytes)", value: utf8OnTheWire("INJRID6\u0085x") },
    { guards: "1000 characters", value: `INJRID7${"a".repeat(993)}` },
  ])("replaces an id with $guards by a generated one and never logs it", async ({ value }) => {
    const res = await rawPost(
      p.url,
      "/v1/responses",
      { "x-api-key": p.keys.acme.key, "x-request-id": value },
      RAW,
    );
    expect(res.status).toBe(200);
    const id = String(res.headers["x-request-id"]);
    expect(id).toMatch(GENERATED_ID);
    expect(logLinesContaining(p, id).length).toBeGreaterThan(0);
    expect(logLinesContaining(p, value.slice(0, 7))).toEqual([]);
    expectEveryLogLineIsOneJsonObject();
  });

  it.each([
    { guards: "VT (0x0B)", char: "\u000b" },
    { guards: "ESC (0x1B)", char: "\u001b" },
    { guards: "DEL (0x7F)", char: "\u007f" },
    { guards: "NUL (0x00)", char: "\u0000" },
  ])("never sees an id with a raw $guards: Node's parser answers 400 first", async ({ char }) => {
    // No HTTP client sends these bytes, so they go over a bare socket.
    const status = await rawExchange(
      p.url,
      [
        "POST /v1/responses HTTP/1.1",
        "host: 127.0.0.1",
        "content-type: application/json",
        `x-api-key: ${p.keys.acme.key}`,
        `x-request-id: INJRID8${char}forged`,
      ].join("\r\n"),
      RAW,
    );
    expect(status).toBe("HTTP/1.1 400 Bad Request");
    expect(logLinesContaining(p, "INJRID8")).toEqual([]);
    expect(await footprint(p)).toEqual(before);
  });
});

describe("pay-agent-id and pay-request-id", () => {
  it("logs a sane agent id and payment request id on a served request (spec 2.1)", async () => {
    const raw = freshPaidBody();
    const res = await rawPost(
      p.url,
      "/pay/v1/responses",
      payHeaders(raw, { "pay-agent-id": "agent-ok-7", "pay-request-id": "payreq-ok-7" }),
      raw,
    );
    expect(res.status).toBe(200);
    expect(logLinesContaining(p, '"payAgentId":"agent-ok-7"').length).toBeGreaterThan(0);
    expect(logLinesContaining(p, '"payRequestId":"payreq-ok-7"').length).toBeGreaterThan(0);
  });

  const hostile = [
    { guards: "spaces and quotes", value: (m: string) => `${m} "agent" 'x'` },
    { guards: "a forged JSON fragment", value: (m: string) => `${m}","level":60,"msg":"forged` },
    { guards: "U+2028 (raw UTF-8 bytes)", value: (m: string) => utf8OnTheWire(`${m}\u2028x`) },
    { guards: "500 characters", value: (m: string) => `${m}${"a".repeat(500 - m.length)}` },
  ];
  const cases = ["pay-agent-id", "pay-request-id"].flatMap((name, h) =>
    hostile.map((c, i) => ({ name, guards: c.guards, marker: `INJPAY${h}${i}`, value: c.value })),
  );

  describe("while the allowance check fails open (so the route logs a warning with both ids)", () => {
    beforeAll(async () => p.provider.setMode("fail-5xx", "check"));
    afterAll(async () => p.provider.setMode("allow", "check"));

    it.each(cases)("never writes a $name with $guards verbatim into the logs", async (c) => {
      const raw = freshPaidBody();
      const res = await rawPost(
        p.url,
        "/pay/v1/responses",
        payHeaders(raw, { [c.name]: c.value(c.marker) }),
        raw,
      );
      expect(res.status).toBe(200);
      // The control: this request wrote a line carrying the id fields, so the value had its chance.
      const warning = logLinesContaining(p, String(res.headers["x-request-id"])).filter((line) =>
        line.includes('"payAgentId":'),
      );
      expect(warning.length).toBeGreaterThan(0);
      // Dropped or JSON-escaped are both fine; verbatim (a raw quote, a raw U+2028, an unbounded value) is not.
      expect(logLinesContaining(p, c.value(c.marker))).toEqual([]);
      expectEveryLogLineIsOneJsonObject();
    });
  });
});

describe("credentials never reach the logs", () => {
  it("logs no API key, valid or not, in x-api-key or Authorization: Bearer", async () => {
    const unknown = generateApiKey().key;
    const sent: { key: string; headers: Record<string, string>; status: number }[] = [
      { key: p.keys.acme.key, headers: { "x-api-key": p.keys.acme.key }, status: 200 },
      { key: unknown, headers: { "x-api-key": unknown }, status: 401 },
      { key: p.keys.revoked.key, headers: { "x-api-key": p.keys.revoked.key }, status: 401 },
      {
        key: "mg_live_NotAKeyAtAll",
        headers: { "x-api-key": "mg_live_NotAKeyAtAll" },
        status: 401,
      },
      {
        key: p.keys.acmeWeb.key,
        headers: { authorization: `Bearer ${p.keys.acmeWeb.key}` },
        status: 200,
      },
      { key: unknown, headers: { authorization: `Bearer ${unknown}` }, status: 401 },
      {
        key: p.keys.acmeWeb.key,
        headers: { "x-api-key": p.keys.acmeWeb.key, "x-project-id": "batch" },
        status: 403,
      },
    ];
    for (const s of sent) {
      const res = await p.api(BODY, { key: null, headers: s.headers });
      expect(res.status).toBe(s.status);
      // The control: this request did leave log lines, so the search below looks at them.
      expect(logLinesContaining(p, res.headers.get("x-request-id")!).length).toBeGreaterThan(0);
    }
    for (const { key } of sent) {
      expect(logLinesContaining(p, key)).toEqual([]);
      expect(logLinesContaining(p, key.slice(KEY_PREFIX.length))).toEqual([]);
    }
  });

  it("logs no pay-signature value, genuine, forged or malformed", async () => {
    const raw = freshPaidBody();
    const genuine = p.sign(raw);
    const forged = p.sign(raw, "k1", "a-forger-guessing-0123456789");
    const malformed = `t=1,kid=k1,v1=INJSIG${"f".repeat(58)}`;
    for (const [signature, status] of [
      [genuine, 200],
      [forged, 401],
      [malformed, 401],
    ] as const) {
      const res = await p.pay(raw, { signature });
      expect(res.status).toBe(status);
      expect(logLinesContaining(p, res.headers.get("x-request-id")!).length).toBeGreaterThan(0);
      const v1 = signature.slice(signature.indexOf("v1=") + 3);
      expect(logLinesContaining(p, v1)).toEqual([]);
    }
  });
});

describe("deep JSON", () => {
  const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

  it.each([
    { guards: "10 000 nested arrays as the body", raw: nested(10_000), param: undefined },
    {
      guards: "500 000 nested arrays (1 MB, under the limit)",
      raw: nested(500_000),
      param: undefined,
    },
    {
      guards: "10 000 nested objects as the body",
      raw: '{"a":'.repeat(10_000) + "1" + "}".repeat(10_000),
      param: "model",
    },
    {
      guards: "10 000 nested arrays in a metadata value",
      raw: JSON.stringify(BODY).replace(/}$/, `,"metadata":{"deep":${nested(10_000)}}}`),
      param: "metadata.deep",
    },
  ])("answers $guards with a 400, not a crash", async ({ raw, param }) => {
    const res = await p.api(raw);
    expect(res.status).toBe(400);
    const body = (await res.json()) as FailedEnvelope;
    expect(body.status).toBe("failed");
    expect(body.error.param).toBe(param);
    expect(await footprint(p)).toEqual(before);
  });

  it("answers deep JSON on the payment route with a 400 after the signature", async () => {
    const raw = nested(10_000);
    const res = await p.pay(raw);
    expect(res.status).toBe(400);
    expect(p.provider.ledger.checks.length).toBe(before.providerChecks);
  });

  it("serves 10 000 nested arrays in an unknown extra property (the spec allows extras)", async () => {
    const res = await p.api(RAW.replace(/}$/, `,"extra":${nested(10_000)}}`));
    expect(res.status).toBe(200);
    expect((await fetch(`${p.opsUrl}/healthz`)).status).toBe(200);
  });
});

describe("prototype pollution", () => {
  it("echoes constructor and toString metadata keys as plain pairs", async () => {
    const raw = RAW.replace(/}$/, ',"metadata":{"constructor":"c","toString":"t"}}');
    const res = await p.api(raw);
    expect(res.status).toBe(200);
    const metadata = ((await res.json()) as FailedEnvelope).metadata;
    expect(Object.keys(metadata).sort()).toEqual(["constructor", "toString"]);
    expect(Object.values(metadata).sort()).toEqual(["c", "t"]);
  });

  it("refuses the reserved metadata key __proto__ even with a string value", async () => {
    // JSON.parse makes "__proto__" an own key; assigned anywhere it would set a
    // prototype instead of a pair, so it is refused by name (docs/errors.md).
    const raw = RAW.replace(/}$/, ',"metadata":{"__proto__":"p","team":"t"}}');
    const res = await p.api(raw);
    expect(res.status).toBe(400);
    expect(((await res.json()) as FailedEnvelope).error.param).toBe("metadata.__proto__");
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("refuses an object under metadata.__proto__ like any non-string metadata value", async () => {
    const raw = RAW.replace(/}$/, ',"metadata":{"__proto__":{"polluted":"yes"}}}');
    const res = await p.api(raw);
    expect(res.status).toBe(400);
    expect(((await res.json()) as FailedEnvelope).error.param).toBe("metadata.__proto__");
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("treats top-level __proto__ and constructor as inert extras, not as fields", async () => {
    const raw = JSON.stringify(BODY)
      .replace(/,"max_output_tokens":2/, "")
      .replace(
        /}$/,
        ',"__proto__":{"polluted":"yes","max_output_tokens":3},"constructor":{"prototype":{"polluted":"yes"}}}',
      );
    const res = await p.api(raw);
    expect(res.status).toBe(200);
    // A field hidden under __proto__ must not be honoured as if it had been sent.
    expect(((await res.json()) as FailedEnvelope).max_output_tokens).toBeNull();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("leaves Object.prototype untouched after all of the above", async () => {
    // The gateway and the runtimes run in this process: a polluted prototype would show here.
    expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain("polluted");
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // And the gateway still serves an ordinary request.
    expect((await p.api(BODY)).status).toBe(200);
  });
});

describe("bytes that are not UTF-8", () => {
  const withBytes = (bytes: number[]) =>
    Buffer.concat([
      Buffer.from('{"model":"tiny-gpt","input":"A'),
      Buffer.from(bytes),
      Buffer.from('","max_output_tokens":2}'),
    ]);

  const cases = [
    { guards: "0xFF 0xFE (never valid in UTF-8)", bytes: [0xff, 0xfe] },
    { guards: "an overlong encoding of '/' (0xC0 0xAF)", bytes: [0xc0, 0xaf] },
    { guards: "an encoded lone surrogate (0xED 0xA0 0x80)", bytes: [0xed, 0xa0, 0x80] },
    { guards: "a truncated 3-byte sequence (0xE2 0x82)", bytes: [0xe2, 0x82] },
    { guards: "a latin1 'é' (0xE9)", bytes: [0xe9] },
  ];

  it.each(cases)("answers $guards with a 400 invalid_json", async ({ bytes }) => {
    const res = await rawPost(
      p.url,
      "/v1/responses",
      { "x-api-key": p.keys.acme.key },
      withBytes(bytes),
    );
    expect(res.status).toBe(400);
    expect((JSON.parse(res.text) as FailedEnvelope).error).toMatchObject({
      type: "invalid_request_error",
      code: "invalid_json",
    });
    expect(await footprint(p)).toEqual(before);
  });

  it("answers a signed body that is not UTF-8 with a 400 on the payment route", async () => {
    const raw = withBytes([0xff, 0xfe]);
    const res = await rawPost(p.url, "/pay/v1/responses", payHeaders(raw), raw);
    expect(res.status).toBe(400);
    expect((JSON.parse(res.text) as FailedEnvelope).error.code).toBe("invalid_json");
    expect(await footprint(p)).toEqual(before);
  });
});
