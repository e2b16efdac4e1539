import { STATUS_CODES, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { CodedError } from "../coded-error.js";
import { HttpErrors } from "./http-errors.js";

/**
 * Answers to what an HTTP server refuses before any request exists (its
 * `clientError` event): bytes Node's parser will not take, or headers that
 * never finished arriving. There is no request and no reply then, so the
 * whole response is written on the socket; it still carries the
 * ErrorEnvelope of a coded error and an `x-request-id`, like every other
 * refusal, and nothing of the refused bytes. The bytes are built by pure
 * functions; `answerOnSocket` only writes them.
 */

/** A Node parser refusal (`HPE_*` in `err.code`): 431 for headers over the limit, else 400. */
export function parserRefusal(errorCode: string | undefined, maxHeaderBytes: number): CodedError {
  return errorCode === "HPE_HEADER_OVERFLOW"
    ? HttpErrors.headersTooLarge(maxHeaderBytes)
    : HttpErrors.malformedRequest();
}

/** The ErrorEnvelope of a coded error, as every error edge of ours writes it. */
export function envelopeOf(error: CodedError): string {
  return JSON.stringify({
    error: {
      message: error.message,
      type: error.type,
      ...(error.param !== null ? { param: error.param } : {}),
      code: error.code,
    },
  });
}

/** What may stand in a header value written here: visible ASCII, so nothing can end the line. */
const HEADER_TOKEN = /^[\x21-\x7e]{1,128}$/;

/**
 * A whole HTTP/1.1 response for `error` on a bare socket: its status, the
 * ErrorEnvelope with its length, `requestId` as `x-request-id`, and
 * `connection: close`, as the connection is closed after it.
 */
export function rawErrorResponse(error: CodedError, requestId: string): Buffer {
  if (!HEADER_TOKEN.test(requestId)) {
    throw new RangeError("rawErrorResponse: a request id is 1 to 128 visible ASCII characters");
  }
  const body = Buffer.from(envelopeOf(error), "utf8");
  const head =
    `HTTP/1.1 ${error.statusCode} ${STATUS_CODES[error.statusCode] ?? "Error"}\r\n` +
    "content-type: application/json\r\n" +
    `content-length: ${body.length}\r\n` +
    `x-request-id: ${requestId}\r\n` +
    "connection: close\r\n\r\n";
  return Buffer.concat([Buffer.from(head, "latin1"), body]);
}

/**
 * How long a refused connection stays open after its answer, reading and
 * dropping what the client still sends (the rest of an oversize header, its
 * body): closing a socket with unread bytes resets it, and a reset can reach
 * the client before it has read the answer.
 */
const LINGER_MS = 2_000;

/** Sockets answered already: a parser that refused once refuses every later chunk again. */
const answered = new WeakSet<Socket>();

/**
 * Writes `response` and closes the socket, when an answer can still be
 * written: not on a socket already closing or answered, and not after a
 * response on it has begun (Node's own handler makes the same check), as
 * bytes written then would be read as part of that response. Returns
 * whether it wrote.
 */
export function answerOnSocket(socket: Socket, response: Buffer): boolean {
  if (socket.destroyed || answered.has(socket)) return false;
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (!socket.writable || inFlight?.headersSent === true) {
    socket.destroy();
    return false;
  }
  answered.add(socket);
  socket.end(response);
  const linger = setTimeout(() => socket.destroy(), LINGER_MS);
  linger.unref();
  socket.once("close", () => clearTimeout(linger));
  return true;
}
