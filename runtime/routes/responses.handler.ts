import type { FastifyReply } from "fastify";
import type { ResponsesRequest } from "../../api/responses-request.js";
import { entityAnswer } from "../../api/entity-answer.js";
import { completedResponse } from "../../api/responses-response.js";
import { INTERACTIVE_LOAD_HEADER, USAGE_HEADERS } from "../../api/runtime-wire.js";
import type { RuntimeContext } from "../context.js";
import type { ModelService } from "../model-service.js";
import { priorityOf } from "./priority.js";
import { adoptResponseId } from "./response-id.js";

/**
 * Usage travels in headers on every answer (api/runtime-wire.ts), so the
 * gateway can meter the classifier's bare label-to-score object as well as a
 * response envelope. The response id is the gateway's when it sent one.
 */
export async function respondToRequest(
  body: ResponsesRequest,
  service: ModelService,
  context: RuntimeContext,
  reply: FastifyReply,
  arrivedAt: number,
  signal: AbortSignal,
): Promise<unknown> {
  const responseId = adoptResponseId(reply);
  const priority = priorityOf(reply.request);
  const result = await service.respond(body, signal, priority);
  // The batch workers pace themselves by it: fewer lines while interactive work is here.
  if (priority === "batch") {
    reply.header(INTERACTIVE_LOAD_HEADER, String(service.interactivePressure));
  }
  const seconds = (context.now() - arrivedAt) / 1000;
  context.metrics.duration.observe({ task: result.task }, seconds);

  if (result.task === "zero-shot-classification") {
    recordUsage(reply, context, result.inputTokens, 0);
    return result.scores;
  }
  if (result.task === "entity-extraction") {
    recordUsage(reply, context, result.inputTokens, 0);
    const answer = entityAnswer(body.input, result.entities, {
      mask: result.options.mask,
      replacement: result.options.replacement,
      schema: result.resolved.schema,
    });
    return completedResponse(
      body,
      {
        text: answer.text,
        annotations: answer.annotations,
        inputTokens: result.inputTokens,
        outputTokens: 0,
        incompleteReason: null,
        createdAt: Math.floor(arrivedAt / 1000),
        completedAt: Math.floor(context.now() / 1000),
      },
      responseId,
    );
  }
  const { outcome } = result;
  recordUsage(reply, context, outcome.inputTokens, outcome.outputTokens);
  reply.header(USAGE_HEADERS.cached, String(outcome.cachedTokens));
  return completedResponse(
    body,
    {
      text: outcome.text,
      inputTokens: outcome.inputTokens,
      cachedTokens: outcome.cachedTokens,
      outputTokens: outcome.outputTokens,
      incompleteReason: outcome.incomplete ? "max_output_tokens" : null,
      createdAt: Math.floor(arrivedAt / 1000),
      completedAt: Math.floor(context.now() / 1000),
    },
    responseId,
  );
}

function recordUsage(
  reply: FastifyReply,
  context: RuntimeContext,
  inputTokens: number,
  outputTokens: number,
): void {
  reply.header(USAGE_HEADERS.input, String(inputTokens));
  reply.header(USAGE_HEADERS.output, String(outputTokens));
  context.metrics.inputTokens.inc(inputTokens);
  context.metrics.outputTokens.inc(outputTokens);
}
