import { EventEmitter } from "node:events";
import type { FastifyReply } from "fastify";

/**
 * A client that goes away cancels the work it asked for. The checks before
 * a handler (the allowance check above all) can take long enough for a
 * client to leave during them, before any handler listens: the handler
 * asks `hasLeft` first, then listens with `whenGone`.
 */

/** The connection closed before the answer was written. */
export function hasLeft(reply: FastifyReply): boolean {
  return (
    !reply.raw.writableFinished && (reply.raw.destroyed || reply.raw.socket?.destroyed === true)
  );
}

/** What a handler throws for a client already gone: the error edge logs it as abandoned. */
export function leftError(): Error {
  return Object.assign(new Error("the client closed the connection before the request ran"), {
    name: "AbortError",
  });
}

/**
 * An emitter of "abort" when the connection closes before the answer is
 * written. undici and stream-request.ts take it as a signal, for a fraction
 * of an AbortController's cost per request.
 */
export function whenGone(reply: FastifyReply): EventEmitter {
  const abort = new EventEmitter();
  reply.raw.once("close", () => {
    if (!reply.raw.writableFinished) abort.emit("abort");
  });
  return abort;
}
