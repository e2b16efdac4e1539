import type { FastifyInstance } from "fastify";
import { checkForTask, validateRequest } from "../../api/validation.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { jsonBody } from "../../lib/http/json-body.js";
import { RuntimeErrors } from "../errors.js";
import type { RuntimeContext } from "../context.js";
import { respondToRequest } from "./responses.handler.js";
import { LiveStreams, cancelRoute, streamResponse } from "./stream.js";

/** POST /v1/responses: the spec's body, for the one model this runtime serves. */
export function responsesRoute(app: FastifyInstance, context: RuntimeContext): void {
  const streams = new LiveStreams();
  cancelRoute(app, streams);
  app.post("/v1/responses", async (request, reply) => {
    const arrivedAt = context.now();
    const validation = validateRequest(jsonBody(request));
    if (!validation.ok) {
      throw HttpErrors.invalidRequest(validation.problem.message, validation.problem.param);
    }
    const body = validation.request;
    if (body.model !== context.modelId)
      throw RuntimeErrors.modelNotFound(body.model, context.modelId);
    const service = context.service();
    if (!service) throw RuntimeErrors.notReady();
    const problem = checkForTask(jsonBody(request), service.task);
    if (problem) throw HttpErrors.invalidRequest(problem.message, problem.param);

    // A caller that hangs up stops its generation at the next token.
    const abort = new AbortController();
    reply.raw.on("close", () => {
      if (!reply.raw.writableFinished) abort.abort(new Error("client closed the connection"));
    });
    if (body.stream === true) {
      return streamResponse(body, service, context, reply, arrivedAt, abort.signal, streams);
    }
    return respondToRequest(body, service, context, reply, arrivedAt, abort.signal);
  });
}
