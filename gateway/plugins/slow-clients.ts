import { maxHeaderSize, type ServerOptions, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  answerOnSocket,
  envelopeOf,
  parserRefusal,
  rawErrorResponse,
} from "../../lib/http/client-error.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { routeConfigOf } from "../routes/route-config.js";
import { newRequestId } from "./request-id.js";

/**
 * Bounds on how long a client may take to send its request (a slow-body
 * attack holds a connection open with a byte every few seconds). Headers
 * must arrive within `requestTimeoutSeconds`, and so must the body of every
 * route but a file upload (`bodyTimeout: "upload"`), which has
 * `uploadTimeoutSeconds`: 200 MB does not cross most links in 30 s. Node's
 * `requestTimeout` is one value per server, so it is set to the larger bound
 * and the smaller one is kept per request by `slowClientHooks`. A request
 * cut off is answered 408 in our ErrorEnvelope while a response can still
 * be sent, then the connection is closed. The time to answer is not bounded
 * here: the model's timeout does that.
 *
 * The server's `clientErrorHandler` is here too, as Node reports a timeout
 * through the same event as its parser's refusals (headers over the limit:
 * 431; malformed bytes: 400). Each is answered in the ErrorEnvelope with an
 * `x-request-id`, the request's own when it reached the server, else a new
 * one: nothing is read from bytes the parser refused.
 */
export function slowClientOptions(
  requestTimeoutSeconds: number,
  uploadTimeoutSeconds: number,
): {
  requestTimeout: number;
  http: ServerOptions;
  clientErrorHandler: (this: FastifyInstance, error: Error, socket: Socket) => void;
} {
  const outerMs = Math.max(requestTimeoutSeconds, uploadTimeoutSeconds) * 1000;
  const headersMs = requestTimeoutSeconds * 1000;
  return {
    requestTimeout: outerMs,
    http: {
      requestTimeout: outerMs,
      headersTimeout: headersMs,
      connectionsCheckingInterval: Math.min(1000, headersMs),
    },
    clientErrorHandler: answerClientError(requestTimeoutSeconds, uploadTimeoutSeconds),
  };
}

/** The response of the request a socket is receiving, while it is being received. */
const receiving = new WeakMap<Socket, ServerResponse>();
/** Sockets receiving a file upload now, whose bound is the upload timeout. */
const uploading = new WeakSet<Socket>();

/** Run first for every request (app.ts's one app-wide `onRequest` hook). */
export function slowClientGuard(
  requestTimeoutSeconds: number,
): (request: FastifyRequest, reply: FastifyReply) => void {
  return (request, reply) => {
    const socket = request.raw.socket;
    receiving.set(socket, reply.raw);
    if (routeConfigOf(request).bodyTimeout === "upload") {
      uploading.add(socket);
      reply.raw.once("close", () => uploading.delete(socket));
    } else if (!request.raw.complete) {
      const timer = setTimeout(() => {
        if (request.raw.complete) return;
        request.log.info({ code: "request_receive_timeout" }, "request not received in time");
        answerTimeout(socket, requestTimeoutSeconds, request.id);
      }, requestTimeoutSeconds * 1000);
      timer.unref();
      const clear = () => clearTimeout(timer);
      request.raw.once("end", clear);
      reply.raw.once("close", clear);
    }
  };
}

/**
 * 408 on the response being received when it can still be sent, which
 * carries its request's x-request-id, else on the bare socket with
 * `requestId`. Returns the id answered with.
 */
function answerTimeout(socket: Socket, seconds: number, requestId: string): string {
  const timeout = HttpErrors.requestNotReceived(seconds);
  const response = receiving.get(socket);
  if (response && !response.headersSent && !response.writableEnded) {
    response.writeHead(408, { "content-type": "application/json", connection: "close" });
    response.end(envelopeOf(timeout), () => socket.destroy());
    return String(response.getHeader("x-request-id"));
  }
  answerOnSocket(socket, rawErrorResponse(timeout, requestId));
  return requestId;
}

function answerClientError(requestTimeoutSeconds: number, uploadTimeoutSeconds: number) {
  return function (this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
    // A reset connection has nobody left to answer.
    if (error.code === "ECONNRESET" || socket.destroyed) return;
    // No request exists for these bytes: the id is a new one, logged with the refusal.
    const requestId = newRequestId();
    if (error.code !== "ERR_HTTP_REQUEST_TIMEOUT") {
      // Node's parser refused the bytes. The server sets no header limit of its
      // own (`http` above), so Node's process-wide one applies.
      const refusal = parserRefusal(error.code, maxHeaderSize);
      if (answerOnSocket(socket, rawErrorResponse(refusal, requestId))) {
        this.log.info(
          { requestId, code: refusal.code, status: refusal.statusCode, parserError: error.code },
          "request refused",
        );
      }
      return;
    }
    // Node's bound is the larger one: past it an upload is cut off; before it, headers never finished.
    const answeredWith = answerTimeout(
      socket,
      uploading.has(socket) ? uploadTimeoutSeconds : requestTimeoutSeconds,
      requestId,
    );
    this.log.info(
      { requestId: answeredWith, code: "request_receive_timeout" },
      "request not received in time",
    );
  };
}
