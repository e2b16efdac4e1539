import type { ServerOptions, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance } from "fastify";
import { HttpErrors } from "../../lib/http/http-errors.js";

/**
 * Bounds on how long a client may take to send its request (a slow-body
 * attack holds a connection open with a byte every few seconds). Node's own
 * timers, through Fastify's options: `requestTimeout` for the whole request,
 * headers and body, `headersTimeout` (the same) for the headers, checked
 * every second. A request cut off is answered 408 in our ErrorEnvelope
 * while a response can still be sent, then the connection is closed.
 * The time to answer is not bounded here: the model's timeout does that.
 */
export function slowClientOptions(requestTimeoutSeconds: number): {
  requestTimeout: number;
  http: ServerOptions;
  clientErrorHandler: (this: FastifyInstance, error: Error, socket: Socket) => void;
} {
  const ms = requestTimeoutSeconds * 1000;
  return {
    requestTimeout: ms,
    http: {
      requestTimeout: ms,
      headersTimeout: ms,
      connectionsCheckingInterval: Math.min(1000, ms),
    },
    clientErrorHandler: answerClientError(requestTimeoutSeconds),
  };
}

/** The response of the request a socket is receiving, while it is being received. */
const receiving = new WeakMap<Socket, ServerResponse>();

export function slowClientHooks(app: FastifyInstance): void {
  app.addHook("onRequest", (request, reply, done) => {
    receiving.set(request.raw.socket, reply.raw);
    done();
  });
}

function answerClientError(requestTimeoutSeconds: number) {
  const timeout = HttpErrors.requestNotReceived(requestTimeoutSeconds);
  const body = JSON.stringify({
    error: { message: timeout.message, type: timeout.type, code: timeout.code },
  });
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
    this.log.info({ code: timeout.code }, "request not received in time");
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
  };
}
