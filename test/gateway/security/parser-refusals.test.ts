import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpErrors } from "../../../lib/http/http-errors.js";
import { rawErrorResponse } from "../../../lib/http/client-error.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { logLinesContaining } from "./support.js";

/**
 * Requests Node's HTTP parser refuses before Fastify runs (headers over the
 * limit, malformed framing) and requests whose headers never finish are
 * answered like every other refusal: the ErrorEnvelope with a code, and an
 * `x-request-id` minted by the gateway, never one read from the broken
 * bytes. Bare sockets: no HTTP client sends these bytes.
 */

const REQUEST_TIMEOUT_SECONDS = 1;
const GENERATED_ID = /^req_[0-9a-f]{32}$/;
const BODY = JSON.stringify({
  model: "tiny-gpt",
  input: "Hello",
  max_output_tokens: 2,
  temperature: 0,
});

let p: Platform;
beforeAll(async () => {
  p = await startPlatform({
    withoutPayments: true,
    config: { requestTimeout: REQUEST_TIMEOUT_SECONDS },
  });
});
afterAll(async () => p?.close());

interface Answer {
  statusLine: string;
  /** Header names lower-cased; a repeated name keeps its values in order. */
  headers: Map<string, string[]>;
  body: Buffer;
}

/** Writes `pieces` on a fresh connection and reads until the server closes it; a reset fails. */
async function exchange(pieces: (string | Buffer)[]): Promise<Answer> {
  const url = new URL(p.url);
  const socket = connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve) => socket.once("connect", resolve));
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  const closed = new Promise<void>((resolve, reject) => {
    socket.on("error", reject);
    socket.on("close", () => resolve());
  });
  for (const piece of pieces) {
    socket.write(typeof piece === "string" ? Buffer.from(piece, "latin1") : piece);
  }
  await closed;
  return parseAnswer(Buffer.concat(chunks));
}

function parseAnswer(raw: Buffer): Answer {
  const end = raw.indexOf("\r\n\r\n");
  expect(end, raw.toString("latin1")).toBeGreaterThan(0);
  const [statusLine, ...lines] = raw.subarray(0, end).toString("latin1").split("\r\n");
  const headers = new Map<string, string[]>();
  for (const line of lines) {
    const colon = line.indexOf(":");
    const name = line.slice(0, colon).toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  return { statusLine: statusLine!, headers, body: raw.subarray(end + 4) };
}

function header(answer: Answer, name: string): string | undefined {
  const values = answer.headers.get(name);
  expect(values?.length ?? 0, `${name} sent at most once`).toBeLessThanOrEqual(1);
  return values?.[0];
}

/** The ErrorEnvelope, its framing, and a gateway-minted id; returns the id. */
function expectEnvelope(answer: Answer, statusLine: string, code: string): string {
  expect(answer.statusLine).toBe(statusLine);
  expect(header(answer, "content-type")).toBe("application/json");
  expect(header(answer, "content-length")).toBe(String(answer.body.length));
  expect(header(answer, "connection")).toBe("close");
  const id = header(answer, "x-request-id");
  expect(id).toMatch(GENERATED_ID);
  const body = JSON.parse(answer.body.toString("utf8")) as {
    error: Record<string, unknown>;
  };
  expect(Object.keys(body)).toEqual(["error"]);
  expect(Object.keys(body.error).sort()).toEqual(["code", "message", "type"]);
  expect(body.error).toMatchObject({ type: "invalid_request_error", code });
  expect(typeof body.error.message).toBe("string");
  return id!;
}

const head = (...lines: string[]) =>
  [
    "POST /v1/responses HTTP/1.1",
    "host: 127.0.0.1",
    "content-type: application/json",
    `x-api-key: ${p.keys.acme.key}`,
    ...lines,
    "",
    "",
  ].join("\r\n");

describe("what Node's parser refuses", () => {
  it("answers a 20,000-byte header with 431 headers_too_large in the envelope", async () => {
    const answer = await exchange([
      head(`x-padding: ${"a".repeat(20_000)}`, `content-length: ${BODY.length}`) + BODY,
    ]);
    const id = expectEnvelope(
      answer,
      "HTTP/1.1 431 Request Header Fields Too Large",
      "headers_too_large",
    );
    // The caller learns what to aim for: Node's header limit, 16 KiB by default.
    expect(answer.body.toString()).toContain("16384 bytes");
    // The id it was given is on a log line, so the caller's report can be found.
    expect(logLinesContaining(p, id).length).toBeGreaterThan(0);
  });

  it("lets the client read its 431 while the rest of a 200 KB header still arrives, without a reset", async () => {
    // Closing a socket with unread bytes resets it, and a reset can overtake the answer.
    const whole = head(`x-padding: ${"a".repeat(200_000)}`, `content-length: ${BODY.length}`);
    const pieces = [];
    for (let at = 0; at < whole.length; at += 8192) pieces.push(whole.slice(at, at + 8192));
    const answer = await exchange(pieces);
    expectEnvelope(answer, "HTTP/1.1 431 Request Header Fields Too Large", "headers_too_large");
  });

  it.each([
    { what: "a header name with a space", lines: [`x bad: 1`, `content-length: ${BODY.length}`] },
    {
      what: "Content-Length with Transfer-Encoding",
      lines: [`content-length: ${BODY.length}`, "transfer-encoding: chunked"],
    },
    {
      what: "two different Content-Lengths",
      lines: [`content-length: ${BODY.length}`, `content-length: ${BODY.length + 1}`],
    },
    { what: "a request line that is not HTTP", lines: [], raw: "HELLO\r\n\r\n" },
  ])("answers $what with 400 invalid_request in the envelope", async ({ lines, raw }) => {
    const answer = await exchange([raw ?? head(...lines) + BODY]);
    expectEnvelope(answer, "HTTP/1.1 400 Bad Request", "invalid_request");
  });

  it("never echoes the broken request's x-request-id, nor logs it", async () => {
    const answer = await exchange([
      head("x-request-id: parser-echo-7", "x bad: 1", `content-length: ${BODY.length}`) + BODY,
    ]);
    const id = expectEnvelope(answer, "HTTP/1.1 400 Bad Request", "invalid_request");
    expect(id).not.toBe("parser-echo-7");
    expect(logLinesContaining(p, "parser-echo-7")).toEqual([]);
  });

  it("serves a normal request on a fresh connection afterwards", async () => {
    await exchange([head(`x-padding: ${"a".repeat(20_000)}`, "content-length: 2") + "{}"]);
    await exchange([head("x bad: 1", "content-length: 2") + "{}"]);
    const res = await p.api(JSON.parse(BODY), { headers: { "x-request-id": "parser-after-1" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe("parser-after-1");
  });
});

describe("headers that never finish", () => {
  it("answers 408 request_receive_timeout in the envelope with a minted id", async () => {
    const answer = await exchange([
      "POST /v1/responses HTTP/1.1\r\nhost: 127.0.0.1\r\nx-request-id: slow-head-1\r\n",
    ]);
    const id = expectEnvelope(answer, "HTTP/1.1 408 Request Timeout", "request_receive_timeout");
    expect(id).not.toBe("slow-head-1");
    expect(answer.body.toString()).toContain(`within ${REQUEST_TIMEOUT_SECONDS} s`);
  }, 10_000);
});

describe("rawErrorResponse", () => {
  it("builds a whole response: status line, framing headers, id, envelope", () => {
    const bytes = rawErrorResponse(HttpErrors.malformedRequest(), "req_0123");
    const body = JSON.stringify({
      error: {
        message: HttpErrors.malformedRequest().message,
        type: "invalid_request_error",
        code: "invalid_request",
      },
    });
    expect(bytes.toString("latin1")).toBe(
      "HTTP/1.1 400 Bad Request\r\n" +
        "content-type: application/json\r\n" +
        `content-length: ${Buffer.byteLength(body)}\r\n` +
        "x-request-id: req_0123\r\n" +
        "connection: close\r\n\r\n" +
        body,
    );
  });

  it("refuses an id that could split the header block", () => {
    expect(() => rawErrorResponse(HttpErrors.malformedRequest(), "a\r\nset-cookie: x")).toThrow(
      RangeError,
    );
    expect(() => rawErrorResponse(HttpErrors.malformedRequest(), "")).toThrow(RangeError);
  });
});
