import type { ServerOptions, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { routeConfigOf } from "../routes/route-config.js";

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
    clientErrorHandler: answerClientError(
      requestTimeoutBody(requestTimeoutSeconds),
      requestTimeoutBody(uploadTimeoutSeconds),
    ),
  };
}

function requestTimeoutBody(seconds: number): string {
  const timeout = HttpErrors.requestNotReceived(seconds);
  return JSON.stringify({
    error: { message: timeout.message, type: timeout.type, code: timeout.code },
  });
}

/** The response of the request a socket is receiving, while it is being received. */
const receiving = new WeakMap<Socket, ServerResponse>();
/** Sockets receiving a file upload now, whose bound is the upload timeout. */
const uploading = new WeakSet<Socket>();

/** Run first for every request (app.ts's one app-wide `onRequest` hook). */
export function slowClientGuard(
  requestTimeoutSeconds: number,
): (request: FastifyRequest, reply: FastifyReply) => void {
  const body = requestTimeoutBody(requestTimeoutSeconds);
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
        answerTimeout(socket, body);
      }, requestTimeoutSeconds * 1000);
      timer.unref();
      const clear = () => clearTimeout(timer);
      request.raw.once("end", clear);
      reply.raw.once("close", clear);
    }
  };
}

/** 408 on the response being received when it can still be sent, else on the bare socket. */
function answerTimeout(socket: Socket, body: string): void {
  const response = receiving.get(socket);
  if (response && !response.headersSent && !response.writableEnded) {
    // The request reached the server: answer on its response, which carries its x-request-id.
    response.writeHead(408, { "content-type": "application/json", connection: "close" });
    response.end(body, () => socket.destroy());
    return;
  }
  if (socket.writable) {
    socket.end(
      `HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  } else socket.destroy();
}

function answerClientError(requestBody: string, uploadBody: string) {
  return function (this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
    // A reset connection has nobody left to answer.
    if (error.code === "ECONNRESET" || socket.destroyed) return;
    if (error.code !== "ERR_HTTP_REQUEST_TIMEOUT") {
      // Node's parser refused the bytes (headers too large, malformed): say so plainly.
      const status =
        error.code === "HPE_HEADER_OVERFLOW"
          ? "431 Request Header Fields Too Large"
          : "400 Bad Request";
      if (socket.writable) {
        socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
      } else socket.destroy(error);
      return;
    }
    // Node's bound is the larger one: past it an upload is cut off; before it, headers never finished.
    this.log.info({ code: "request_receive_timeout" }, "request not received in time");
    answerTimeout(socket, uploading.has(socket) ? uploadBody : requestBody);
  };
}
