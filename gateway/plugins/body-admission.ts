import type { FastifyRequest, FastifySchemaCompiler, preValidationHookHandler } from "fastify";
import type { ResponsesRequest } from "../../api/responses-request.js";
import { validateRequest } from "../../api/validation.js";
import type { RouteName } from "../../crds/inference-model.js";
import type { CodedError } from "../../lib/coded-error.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { GatewayErrors } from "../errors.js";
import type { ModelRegistry, RoutableModel } from "../registry/registry.js";

/**
 * The body of a model route, judged by the route's schema: Fastify's
 * validation step runs `RequestBodySchema`, which resolves `model` first
 * (400 `model_not_found` for a model unknown or not served on this route)
 * and then parses the body with the request schema of that model's task
 * (api/responses-request.ts), the same schema the OpenAPI document is
 * generated from. Every failure is a 400 in the failed envelope, raised at
 * the one error edge.
 */
export type BodyVerdict = { value: ResponsesRequest } | { error: CodedError };

/** The model each admitted body was validated against, for the admission hook. */
const admittedModels = new WeakMap<object, RoutableModel>();

export class RequestBodySchema {
  constructor(
    private readonly registry: ModelRegistry,
    private readonly route: RouteName,
  ) {}

  validate(body: unknown): BodyVerdict {
    const named =
      typeof body === "object" && body !== null ? (body as { model?: unknown }).model : null;
    if (typeof named !== "string" || named.length === 0) return invalid(validateRequest(body));
    const model = this.registry.resolve(named);
    // A model not served on this route is, to this route's callers, not there.
    if (!model || !model.routes.has(this.route))
      return { error: GatewayErrors.modelNotFound(named) };
    const validation = validateRequest(body, model.task);
    if (!validation.ok) return invalid(validation);
    admittedModels.set(validation.request, model);
    return { value: validation.request };
  }
}

function invalid(validation: ReturnType<typeof validateRequest>): BodyVerdict {
  if (validation.ok) throw new Error("unreachable: a body without a model validated");
  return {
    error: HttpErrors.invalidRequest(validation.problem.message, validation.problem.param),
  };
}

/** The validator compiler of the model routes' scope: their bodies are `RequestBodySchema`s. */
export const compileBodySchema: FastifySchemaCompiler<unknown> = ({ schema }) => {
  if (schema instanceof RequestBodySchema) return (data) => schema.validate(data);
  throw new Error("gateway routes validate bodies with RequestBodySchema only");
};

/**
 * `preValidation`: a body that could not be read as JSON was kept aside by
 * the content-type parser (json-body.ts), so that a payment signature is
 * checked first; it is raised here, after authentication, before validation,
 * on the routes that read a body (route-hooks.ts).
 */
export const raiseBodyProblem: preValidationHookHandler = (request, _reply, done) => {
  done(request.bodyProblem);
};

/** `preHandler`, first on a model route: the model the admitted body was validated against. */
export function admitModel(request: FastifyRequest): void {
  request.model = admittedModels.get(request.body as object) ?? null;
}
