import { isUtf8 } from "node:buffer";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { CodedError } from "../coded-error.js";
import { HttpErrors } from "./http-errors.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The body exactly as received: what a signature covers and what is forwarded. */
    rawBody?: Buffer;
    /** Why the body could not be read as JSON; raised by `jsonBody` when a handler asks. */
    bodyProblem?: CodedError;
  }
}

/**
 * JSON bodies only, with our own messages: malformed JSON and any other
 * Content-Type are 400s that say what is wrong, as the spec asks, instead of
 * Fastify's 415 and generic parse errors. The raw bytes are always kept, and
 * a bad body is not refused here: the handler raises it when its own order
 * says so (a payment signature is checked before the body is judged).
 */
export function acceptJsonBodiesOnly(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    const raw = body as Buffer;
    request.rawBody = raw;
    // Fastify does not decode a compressed body: it would read as bytes that
    // are not UTF-8, a misleading reason.
    const encoding = request.headers["content-encoding"];
    if (encoding !== undefined && encoding.toLowerCase() !== "identity") {
      request.bodyProblem = HttpErrors.unsupportedContentEncoding(encoding);
      done(null, undefined);
      return;
    }
    // Bytes that are not UTF-8 are an error, not silently replaced. isUtf8 is
    // a native check: a fatal TextDecoder costs far more per request.
    if (!isUtf8(raw)) {
      request.bodyProblem = HttpErrors.invalidJson("the body is not valid UTF-8");
      done(null, undefined);
      return;
    }
    try {
      done(null, JSON.parse(raw.toString("utf8")));
    } catch (error) {
      request.bodyProblem = HttpErrors.invalidJson((error as Error).message);
      done(null, undefined);
    }
  });
  app.addContentTypeParser("*", { parseAs: "buffer" }, (request, body, done) => {
    request.rawBody = body as Buffer;
    request.bodyProblem = HttpErrors.unsupportedContentType(
      request.headers["content-type"] ?? "(none)",
    );
    done(null, undefined);
  });
}

/** The parsed JSON body, or the 400 that says why there is none. */
export function jsonBody(request: FastifyRequest): unknown {
  if (request.bodyProblem) throw request.bodyProblem;
  return request.body;
}
