import { EventEmitter } from "node:events";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ResponsesRequest } from "../../api/responses-request.js";
import { checkForTask, validateRequest } from "../../api/validation.js";
import type { RouteName } from "../../crds/inference-model.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { jsonBody } from "../../lib/http/json-body.js";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import { GatewayErrors } from "../errors.js";
import type { GatewayMetrics } from "../metrics.js";
import type { ModelRegistry, RoutableModel } from "../registry/registry.js";
import type { Upstream } from "../upstream/forward.js";
import { relayOf, relayedHeaders, type Usage } from "../upstream/relay.js";

/**
 * The steps both routes share once the caller is authenticated: validate the
 * body, resolve the model for this route, forward the raw bytes to a runtime,
 * and relay its answer. Authentication, limits and billing differ per route
 * and live in the route handlers.
 */
export interface InferenceDeps {
  registry: ModelRegistry;
  upstream: Upstream;
  metrics: GatewayMetrics;
}

export interface Admitted {
  body: ResponsesRequest;
  model: RoutableModel;
}

/** Validation and routing: every failure here is a 400 in the failed envelope. */
export function admit(deps: InferenceDeps, request: FastifyRequest, route: RouteName): Admitted {
  const validation = validateRequest(jsonBody(request));
  if (!validation.ok) {
    throw HttpErrors.invalidRequest(validation.problem.message, validation.problem.param);
  }
  const body = validation.request;
  const model = deps.registry.resolve(body.model);
  // A model not served on this route is, to this route's callers, not there.
  if (!model || !model.routes.has(route)) throw GatewayErrors.modelNotFound(body.model);
  const problem = checkForTask(body, model.task);
  if (problem) throw HttpErrors.invalidRequest(problem.message, problem.param);
  return { body, model };
}

export type Forwarded =
  | { kind: "success"; status: 200; headers: Record<string, string>; body: Buffer; usage: Usage }
  | { kind: "client-error"; status: number; headers: Record<string, string>; body: Buffer };

export async function forward(
  deps: InferenceDeps,
  request: FastifyRequest,
  admitted: Admitted,
): Promise<Forwarded> {
  const started = performance.now();
  // A client that goes away cancels the runtime's work. undici takes an
  // EventEmitter that emits "abort" as a signal, which costs a fraction of
  // an AbortController per request.
  const abort = new EventEmitter();
  request.raw.once("close", () => {
    if (request.raw.destroyed && !request.raw.complete) abort.emit("abort");
  });
  const answer = await deps.upstream.forward({
    model: admitted.model,
    body: request.rawBody ?? Buffer.from(JSON.stringify(admitted.body)),
    headers: { "content-type": "application/json", "x-request-id": request.id },
    signal: abort,
  });
  deps.metrics.upstreamDuration.observe(
    { model: admitted.model.id },
    (performance.now() - started) / 1000,
  );
  const relay = relayOf(answer.status, answer.headers, admitted.model.id);
  const headers = relayedHeaders(answer.headers);
  if (relay.kind === "error") throw relay.error;
  if (relay.kind === "client-error") {
    return { kind: "client-error", status: answer.status, headers, body: answer.body };
  }
  if (!relay.usage) {
    // Without usage nothing can be billed: refuse rather than serve for free.
    request.log.error(
      { ...logFieldsOf(request), endpoint: answer.endpoint },
      "runtime answered without usage headers",
    );
    throw GatewayErrors.upstreamError(admitted.model.id);
  }
  return { kind: "success", status: 200, headers, body: answer.body, usage: relay.usage };
}

/** Sends a runtime's answer on, marked as inference that ran in the platform. */
export function sendForwarded(
  reply: FastifyReply,
  forwarded: Forwarded,
  extra: Record<string, string> = {},
): FastifyReply {
  reply.code(forwarded.status).headers({ ...forwarded.headers, ...extra });
  if (forwarded.kind === "success") reply.header("x-inference-type", "cloud");
  return reply.send(forwarded.body);
}
