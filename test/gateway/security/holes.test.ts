import { request } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../support/cluster.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { footprint, logLinesContaining, rawPost } from "./support.js";

/**
 * The billing and exposure holes that a round of attacks found, one suite
 * each: usage keyed by the caller's x-request-id, payment signatures accepted
 * more than once, metrics on the public port, slow bodies holding
 * connections, secrets from URLs in the logs. Each case failed on the gateway
 * as it was before.
 */

const BODY = { model: "tiny-gpt", input: "Hello", max_output_tokens: 2, temperature: 0 };
let bodies = 0;
/** A body never sent before: a payment signature covers exactly one. */
const freshBody = () => JSON.stringify({ ...BODY, metadata: { n: `holes-${++bodies}` } });

/** The v1 digest of a header built by `p.sign`. */
const v1Of = (signature: string) => /v1=([0-9a-f]{64})/.exec(signature)![1]!;

const REQUEST_TIMEOUT_SECONDS = 2;

let p: Platform;
beforeAll(async () => {
  p = await startPlatform({ config: { requestTimeout: REQUEST_TIMEOUT_SECONDS } });
});
afterAll(async () => p?.close());

interface WireUsage {
  response_id: string;
  request_id: string;
  account: string;
}

function sinkRecords(): WireUsage[] {
  return [...p.sink.counted.values()] as WireUsage[];
}

describe("usage is keyed by the gateway's response id, never by the caller's x-request-id", () => {
  it("meters four requests that share one x-request-id as four records", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await p.api(BODY, { headers: { "x-request-id": "shared-usage-id-1" } });
      expect(res.status).toBe(200);
      ids.push(((await res.json()) as { id: string }).id);
    }
    // Four distinct responses, each the key of its own record.
    expect(new Set(ids).size).toBe(4);
    for (const id of ids) expect(id).toMatch(/^resp_/);
    const records = await eventually(() => {
      const found = sinkRecords().filter((r) => r.request_id === "shared-usage-id-1");
      expect(found).toHaveLength(4);
      return found;
    });
    expect(records.map((r) => r.response_id).sort()).toEqual([...ids].sort());
    expect([...p.sink.counted.keys()]).toEqual(expect.arrayContaining(ids));
  });

  it("bills a second account that reuses another account's x-request-id", async () => {
    const first = await p.api(BODY, { headers: { "x-request-id": "shared-usage-id-2" } });
    const second = await p.api(BODY, {
      key: p.keys.limited.key,
      headers: { "x-request-id": "shared-usage-id-2" },
    });
    expect([first.status, second.status]).toEqual([200, 200]);
    const accounts = await eventually(() => {
      const found = sinkRecords().filter((r) => r.request_id === "shared-usage-id-2");
      expect(found).toHaveLength(2);
      return found.map((r) => r.account).sort();
    });
    expect(accounts).toEqual(["acme", "globex"]);
  });

  it("settles five different paid bodies under one x-request-id five times", async () => {
    const responseIds: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await p.pay(freshBody(), { headers: { "x-request-id": "shared-pay-id-3" } });
      expect(res.status).toBe(200);
      responseIds.push(((await res.json()) as { id: string }).id);
    }
    const settled = await eventually(() => {
      const found = p.provider.ledger.settlements.filter((s) => s.requestId === "shared-pay-id-3");
      expect(found).toHaveLength(5);
      return found;
    });
    expect(settled.map((s) => s.responseId).sort()).toEqual([...responseIds].sort());
    expect(new Set(settled.map((s) => s.idempotencyKey)).size).toBe(5);
  });
});

describe("a payment signature is accepted once", () => {
  it("refuses the same signed request sent twice: served once, settled once", async () => {
    const raw = freshBody();
    const signature = p.sign(raw);
    const before = await footprint(p);
    const first = await p.pay(raw, { signature });
    expect(first.status).toBe(200);
    const replay = await p.pay(raw, { signature });
    expect(replay.status).toBe(401);
    expect(await replay.json()).toEqual({ error: "invalid_pay_signature" });
    const after = await footprint(p);
    // Served (and checked with the provider) once only.
    expect(after.gptRequests - before.gptRequests).toBe(1);
    expect(after.providerChecks - before.providerChecks).toBe(1);
    const digest = v1Of(signature);
    await eventually(() =>
      expect(
        p.provider.ledger.settlements.filter((s) => s.signatureDigest === digest),
      ).toHaveLength(1),
    );
  });

  it("refuses a replay with only pay-agent-id changed, so a charge cannot move to another agent", async () => {
    const raw = freshBody();
    const signature = p.sign(raw);
    const first = await p.pay(raw, { signature, headers: { "pay-agent-id": "holes-agent-a" } });
    expect(first.status).toBe(200);
    const moved = await p.pay(raw, { signature, headers: { "pay-agent-id": "holes-agent-b" } });
    expect(moved.status).toBe(401);
    await eventually(() =>
      expect(p.provider.ledger.settlements.some((s) => s.agentId === "holes-agent-a")).toBe(true),
    );
    expect(p.provider.ledger.settlements.some((s) => s.agentId === "holes-agent-b")).toBe(false);
    expect(p.provider.ledger.checks.some((c) => c.agentId === "holes-agent-b")).toBe(false);
  });

  it("serves the same body again when the provider signs it again with a new timestamp", async () => {
    const raw = freshBody();
    const now = Math.floor(Date.now() / 1000);
    const earlier = await p.pay(raw, { t: now - 1 });
    const later = await p.pay(raw, { t: now });
    expect([earlier.status, later.status]).toEqual([200, 200]);
  });

  it("counts refused replays in a metric", async () => {
    const raw = freshBody();
    const signature = p.sign(raw);
    const replays = async () => {
      const text = await (await fetch(`${p.opsUrl}/metrics`)).text();
      return Number(/^modelgate_gateway_pay_replays_total (\d+)/m.exec(text)?.[1] ?? "NaN");
    };
    const before = await replays();
    expect((await p.pay(raw, { signature })).status).toBe(200);
    expect((await p.pay(raw, { signature })).status).toBe(401);
    expect(await replays()).toBe(before + 1);
  });

  it("settles with what the provider signed: the digest, not an unsigned header", async () => {
    const raw = freshBody();
    const signature = p.sign(raw);
    const res = await p.pay(raw, {
      signature,
      headers: { "pay-agent-id": "holes-agent-c", "pay-request-id": "holes-payreq-c" },
    });
    expect(res.status).toBe(200);
    const settlement = await eventually(() => {
      const found = p.provider.ledger.settlements.find((s) => s.agentId === "holes-agent-c");
      expect(found).toBeDefined();
      return found!;
    });
    expect(settlement.signatureDigest).toBe(v1Of(signature));
    expect(settlement.payRequestId).toBe("holes-payreq-c");
  });
});

describe("metrics and health are not on the API port", () => {
  it.each(["/metrics", "/healthz", "/readyz"])(
    "answers %s on the API port with 404",
    async (path) => {
      const res = await fetch(`${p.url}${path}`);
      expect(res.status).toBe(404);
      expect(await res.text()).not.toContain("modelgate_gateway");
    },
  );

  it("serves them on the operations port", async () => {
    expect((await fetch(`${p.opsUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${p.opsUrl}/readyz`)).status).toBe(200);
    const metrics = await fetch(`${p.opsUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain("modelgate_gateway_requests_total");
  });

  it("never makes a caller-chosen pay-agent-id a label value", async () => {
    const res = await p.pay(freshBody(), { headers: { "pay-agent-id": "HOLESAGENTLABEL7" } });
    expect(res.status).toBe(200);
    const text = await (await fetch(`${p.opsUrl}/metrics`)).text();
    // The control: the request was counted.
    expect(text).toMatch(/modelgate_gateway_pay_tokens_total\{model="tiny-gpt"/);
    expect(text).not.toContain("HOLESAGENTLABEL7");
  });
});

describe("a client that sends its request slowly", () => {
  it("is answered 408 with its x-request-id and disconnected once the request timeout passes", async () => {
    const url = new URL(p.url);
    const raw = JSON.stringify(BODY);
    const socket = connect(Number(url.port), url.hostname);
    await new Promise<void>((resolve) => socket.once("connect", resolve));
    socket.write(
      [
        "POST /v1/responses HTTP/1.1",
        "host: 127.0.0.1",
        "content-type: application/json",
        `content-length: ${raw.length}`,
        `x-api-key: ${p.keys.acme.key}`,
        "x-request-id: holes-slow-1",
        "",
        "",
      ].join("\r\n"),
    );
    // One byte every half second: the whole body would take longer than the timeout.
    let sent = 0;
    const drip = setInterval(() => {
      if (sent < raw.length && !socket.destroyed) socket.write(raw[sent++]!);
    }, 500);
    const answer = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => chunks.push(chunk));
      socket.on("close", () => resolve(Buffer.concat(chunks).toString("utf8")));
      socket.on("error", () => undefined);
    });
    clearInterval(drip);
    expect(sent).toBeLessThan(raw.length);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer.toLowerCase()).toContain("x-request-id: holes-slow-1");
    expect(answer).toContain('"code":"request_receive_timeout"');
  });
});

describe("secrets in URLs and ids never reach the logs", () => {
  it("logs the route path, not a query string carrying a key", async () => {
    const res = await rawPost(
      p.url,
      `/v1/responses?key=${p.keys.acme.key}`,
      { "x-api-key": p.keys.acme.key, "x-request-id": "holes-query-1" },
      JSON.stringify(BODY),
    );
    expect(res.status).toBe(200);
    const lines = logLinesContaining(p, "holes-query-1");
    // The control: the request was logged, with its path.
    expect(lines.some((l) => l.includes('"path":"/v1/responses"'))).toBe(true);
    expect(logLinesContaining(p, p.keys.acme.key)).toEqual([]);
    expect(logLinesContaining(p, "?key=")).toEqual([]);
  });

  it("scrubs a key-shaped value wherever it appears, even as a caller's x-request-id", async () => {
    const keyShaped = "mg_live_HOLESKEYSHAPED0123456789";
    const res = await p.api(BODY, { headers: { "x-request-id": keyShaped } });
    expect(res.status).toBe(200);
    // The id is echoed to its caller, who sent it, but never written to a log line.
    expect(res.headers.get("x-request-id")).toBe(keyShaped);
    expect(logLinesContaining(p, "HOLESKEYSHAPED")).toEqual([]);
    expect(logLinesContaining(p, "mg_live_[redacted]").length).toBeGreaterThan(0);
  });
});

describe("methods a path does not serve", () => {
  it("answers GET /v1/responses with 405 and Allow, in the error envelope", async () => {
    const res = await fetch(`${p.url}/v1/responses`, { headers: { "x-api-key": p.keys.acme.key } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect(await res.json()).toMatchObject({ error: { code: "method_not_allowed" } });
  });

  // fetch() refuses to send TRACE, so a raw request: fuzzers (Schemathesis's
  // unsupported_method) send it to every path and expect a 405; WebDAV's
  // methods are beyond Fastify's own, and were the 404 of no route.
  it.each([
    ["TRACE", "/v1/responses"],
    ["TRACE", "/v1/models"],
    ["TRACE", "/v1/files"],
    ["TRACE", "/pay/v1/responses"],
    ["PROPFIND", "/v1/responses"],
    ["MKCOL", "/v1/files/file-x"],
    ["SEARCH", "/v1/batches"],
  ])("answers %s %s with 405 and Allow, not 404: the path exists", async (method, path) => {
    const answer = await new Promise<{ status: number; allow: string; body: string }>(
      (resolve, reject) => {
        const req = request(`${p.url}${path}`, {
          method,
          headers: { "x-api-key": p.keys.acme.key },
        });
        req.on("response", (res) => {
          let body = "";
          res.on("data", (chunk: Buffer) => (body += chunk.toString()));
          res.on("end", () =>
            resolve({ status: res.statusCode!, allow: String(res.headers.allow), body }),
          );
        });
        req.on("error", reject);
        req.end();
      },
    );
    expect(answer.status).toBe(405);
    expect(answer.allow).not.toContain(method);
    expect(answer.allow.length).toBeGreaterThan(0);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: "method_not_allowed" } });
  });

  it("names the path as the document does, {response_id}, not Fastify's :response_id", async () => {
    const res = await fetch(`${p.url}/v1/responses/resp_x`, {
      method: "PUT",
      headers: { "x-api-key": p.keys.acme.key },
    });
    expect(res.status).toBe(405);
    const { error } = (await res.json()) as { error: { message: string } };
    expect(error.message).toContain("/v1/responses/{response_id} does not serve PUT");
  });

  it("answers a refused request on no route in the error envelope, not as a failed response", async () => {
    const res = await fetch(`${p.url}/nothing-here`, { method: "QUERY" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(["error"]);
    expect(body.error).toMatchObject({ code: "unsupported_content_type" });
  });
});
