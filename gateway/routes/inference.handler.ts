import { EventEmitter } from "node:events";
import type { FastifyReply, FastifyRequest } from "fastify";
import { RESPONSE_ID_HEADER } from "../../api/runtime-wire.js";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import { GatewayErrors } from "../errors.js";
import type { GatewayMetrics } from "../metrics.js";
import { responseIdOf } from "../plugins/request-id.js";
import type { MeteringParts } from "../plugins/metering.js";
import type { Upstream } from "../upstream/forward.js";
import { relayOf, relayedHeaders } from "../upstream/relay.js";
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
}

export function inferenceHandler(deps: InferenceDeps) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const model = request.model;
    if (!model) throw new Error(`route ${request.routeOptions.url} has no admitted model`);
    const { body, continues } = await forwardBodyOf(deps, request, model.task);
    // A continued conversation goes back to the runtime that answered its
    // previous turn, whose prefix cache holds it (docs/prefix-cache.md).
    const preferredEndpoint = continues?.servedBy ?? undefined;
    if ((request.body as { stream?: unknown }).stream === true) {
      return relayStream(request, reply, deps, body, preferredEndpoint);
    }
    const started = performance.now();
    // A client that goes away cancels the runtime's work. undici takes an
    // EventEmitter that emits "abort" as a signal, which costs a fraction of
    // an AbortController per request.
    const abort = new EventEmitter();
    request.raw.once("close", () => {
      if (request.raw.destroyed && !request.raw.complete) abort.emit("abort");
    });
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
      reply.header("x-inference-type", "cloud");
      reply.served = { model, usage: relay.usage };
      // A classifier answers a bare label-to-score object, never stored: its
      // bytes are not read as JSON, nor are those of a `store: false` answer.
      if (
        deps.responses &&
        model.task !== "zero-shot-classification" &&
        (request.body as { store?: unknown }).store !== false
      ) {
        const json = answer.body.toString("utf8");
        await storeAnswer(deps, request, JSON.parse(json), json, answer.endpoint);
      }
    }
    return reply.send(answer.body);
  };
}
