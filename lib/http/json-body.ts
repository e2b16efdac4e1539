import type { FastifyInstance } from "fastify";
import { HttpErrors } from "./http-errors.js";

/**
 * JSON bodies only, with our own messages: malformed JSON and any other
 * Content-Type are 400s that say what is wrong, as the spec asks, instead of
 * Fastify's 415 and generic parse errors.
 */
export function acceptJsonBodiesOnly(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    try {
      done(null, JSON.parse(body as string));
    } catch (error) {
      done(HttpErrors.invalidJson((error as Error).message), undefined);
    }
  });
  app.addContentTypeParser("*", (request, _payload, done) => {
    const type = request.headers["content-type"] ?? "(none)";
    done(HttpErrors.unsupportedContentType(type), undefined);
  });
}
