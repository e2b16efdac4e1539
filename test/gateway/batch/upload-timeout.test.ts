import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import { gptLine, jsonlOf } from "./support.js";

/**
 * A file upload has `--upload-timeout` to arrive, every other request
 * `--request-timeout`: a large file over a slow link is not a slow-body
 * attack, and a small JSON body trickled in still is. Raw sockets, so that
 * the body arrives exactly as slowly as the test says.
 */
const REQUEST_TIMEOUT_SECONDS = 1;
const UPLOAD_TIMEOUT_SECONDS = 4;

let p: Platform;
beforeAll(async () => {
  p = await startPlatform({
    withoutPayments: true,
    config: { requestTimeout: REQUEST_TIMEOUT_SECONDS, uploadTimeout: UPLOAD_TIMEOUT_SECONDS },
  });
});
afterAll(async () => p?.close());

const BOUNDARY = "modelgate-upload-timeout";
function uploadBody(): Buffer {
  return Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\ncontent-disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
        `--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="in.jsonl"\r\n` +
        "content-type: application/jsonl\r\n\r\n",
    ),
    jsonlOf([gptLine(1), gptLine(2)]),
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
}

/** Sends the headers at once and the body in ten equal pieces spread over `seconds`; resolves with the raw answer. */
async function trickle(
  path: string,
  contentType: string,
  body: Buffer,
  seconds: number,
): Promise<{ answer: string; sentAll: boolean }> {
  const url = new URL(p.url);
  const socket = connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve) => socket.once("connect", resolve));
  socket.write(
    [
      `POST ${path} HTTP/1.1`,
      "host: 127.0.0.1",
      `content-type: ${contentType}`,
      `content-length: ${body.length}`,
      `x-api-key: ${p.keys.acme.key}`,
      "connection: close",
      "",
      "",
    ].join("\r\n"),
  );
  const pieces = 10;
  const size = Math.ceil(body.length / pieces);
  let piece = 0;
  const drip = setInterval(
    () => {
      if (piece < pieces && !socket.destroyed)
        socket.write(body.subarray(piece * size, ++piece * size));
    },
    (seconds * 1000) / pieces,
  );
  const answer = await new Promise<string>((resolve) => {
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("utf8")));
    socket.on("error", () => undefined);
  });
  clearInterval(drip);
  return { answer, sentAll: piece === pieces };
}

describe("upload timeout", () => {
  it("takes an upload slower than the request timeout and within the upload timeout", async () => {
    const { answer, sentAll } = await trickle(
      "/v1/files",
      `multipart/form-data; boundary=${BOUNDARY}`,
      uploadBody(),
      REQUEST_TIMEOUT_SECONDS * 2.5,
    );
    expect(sentAll).toBe(true);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/"object":"file"/);
  }, 20_000);

  it("answers 408 naming the upload timeout when an upload takes longer", async () => {
    const { answer, sentAll } = await trickle(
      "/v1/files",
      `multipart/form-data; boundary=${BOUNDARY}`,
      uploadBody(),
      UPLOAD_TIMEOUT_SECONDS * 2,
    );
    expect(sentAll).toBe(false);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('"code":"request_receive_timeout"');
    expect(answer).toContain(`within ${UPLOAD_TIMEOUT_SECONDS} s`);
  }, 20_000);

  it("still gives a JSON body on another route only the request timeout", async () => {
    const body = Buffer.from(JSON.stringify({ model: "tiny-gpt", input: "slowly, slowly" }));
    const { answer, sentAll } = await trickle(
      "/v1/responses",
      "application/json",
      body,
      REQUEST_TIMEOUT_SECONDS * 3,
    );
    expect(sentAll).toBe(false);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain(`within ${REQUEST_TIMEOUT_SECONDS} s`);
  }, 20_000);
});
