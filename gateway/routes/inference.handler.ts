import type { FastifyReply, FastifyRequest } from "fastify";
import { RESPONSE_ID_HEADER } from "../../api/runtime-wire.js";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import { GatewayErrors } from "../errors.js";
import type { GatewayMetrics } from "../metrics.js";
import { responseIdOf } from "../plugins/request-id.js";
import type { MeteringParts } from "../plugins/metering.js";
import type { Upstream } from "../upstream/forward.js";
import { relayOf, relayedHeaders } from "../upstream/relay.js";
import { hasLeft, leftError, whenGone } from "./client-gone.js";
import { relayStream } from "./relay-stream.js";
import { forwardBodyOf, storeAnswer, type StoredDeps } from "./stored-responses.handler.js";

/**
 * The handler of both model routes, once the hooks have authenticated the
 * caller, admitted the body and, on the payment route, checked the
 * allowance: forward the raw bytes to a runtime of the admitted model and
 * relay its answer. Billing happens in the metering hook, from `reply.served`.
 */
export interface InferenceDeps extends StoredDeps {
  upstream: Upstream;
  metrics: GatewayMetrics;
  /** A stream bills from its terminal event, not in the metering hook. */
  metering: MeteringParts;
  /** The most bytes forwarded to a runtime, a continued conversation included. */
  bodyLimit: number;
}

export function inferenceHandler(deps: InferenceDeps) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const model = request.model;
    if (!model) throw new Error(`route ${request.routeOptions.url} has no admitted model`);
    const { body, continues } = await forwardBodyOf(deps, request, model);
    // A continued conversation goes back to the runtime that answered its
    // previous turn, whose prefix cache holds it (docs/prefix-cache.md).
    const preferredEndpoint = continues?.servedBy ?? undefined;
    if ((request.body as { stream?: unknown }).stream === true) {
      return relayStream(request, reply, deps, body, preferredEndpoint);
    }
    if (hasLeft(reply)) throw leftError();
    const started = performance.now();
    // A client that goes away cancels the runtime's work.
    const abort = whenGone(reply);
    const answer = await deps.upstream.forward({
      model,
      body,
      headers: {
        "content-type": "application/json",
        "x-request-id": request.id,
        [RESPONSE_ID_HEADER]: responseIdOf(request),
      },
      signal: abort,
      preferredEndpoint,
    });
    deps.metrics.upstreamDuration.observe(
      { model: model.id },
      (performance.now() - started) / 1000,
    );
    const relay = relayOf(answer.status, answer.headers, model.id);
    if (relay.kind === "error") throw relay.error;
    reply.code(answer.status).headers(relayedHeaders(answer.headers));
    if (relay.kind === "success") {
      if (!relay.usage) {
        // Without usage nothing can be billed: refuse rather than serve for free.
        request.log.error(
          { ...logFieldsOf(request), endpoint: answer.endpoint },
          "runtime answered without usage headers",
        );
        throw GatewayErrors.upstreamError(model.id);
      }
      // A classifier answers a bare label-to-score object, never stored: its
      // bytes are not read as JSON, nor are those of a `store: false` answer.
      const stored =
        deps.responses &&
        model.task !== "zero-shot-classification" &&
        (request.body as { store?: unknown }).store !== false
          ? storableAnswer(request, answer.body, answer.endpoint, model.id)
          : null;
      // Served only once the answer is known to be whole: what is billed is
      // what the caller gets.
      reply.header("x-inference-type", "cloud");
      reply.served = { model, usage: relay.usage };
      if (stored) await storeAnswer(deps, request, stored.response, stored.json, answer.endpoint);
    }
    return reply.send(answer.body);
  };
}

/**
 * The runtime's answer read as JSON for the store. One that is not JSON is a
 * runtime fault: a 502, served and billed to no one.
 */
function storableAnswer(
  request: FastifyRequest,
  body: Buffer,
  endpoint: string,
  modelId: string,
): { response: unknown; json: string } {
  const json = body.toString("utf8");
  try {
    return { response: JSON.parse(json), json };
  } catch (error) {
    request.log.error(
      { ...logFieldsOf(request), endpoint, err: error },
      "runtime answered a body that is not JSON",
    );
    throw GatewayErrors.upstreamError(modelId);
  }
}
