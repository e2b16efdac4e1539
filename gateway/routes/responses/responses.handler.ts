import type { FastifyReply, FastifyRequest } from "fastify";
import { GatewayErrors } from "../../errors.js";
import type { ApiKeyAuth, RateLimit, UsageMeter } from "../../ports.js";
import { admit, forward, sendForwarded, type InferenceDeps } from "../inference.js";

/**
 * The API-key route: authenticate, authorize the project, limit, then run
 * the shared inference path and meter what the runtime reports. The usage
 * record is durable before the answer leaves, so a crash cannot lose it.
 */
export interface ResponsesDeps extends InferenceDeps {
  keys: ApiKeyAuth;
  rateLimit: RateLimit;
  meter: UsageMeter;
  now: () => number;
}

/** `x-api-key`, or the OpenAI clients' `Authorization: Bearer <key>`. */
export function apiKeyOf(request: FastifyRequest): string | undefined {
  const header = request.headers["x-api-key"];
  if (typeof header === "string" && header.length > 0) return header;
  const authorization = request.headers.authorization;
  const bearer = typeof authorization === "string" ? /^Bearer\s+(\S+)$/i.exec(authorization) : null;
  return bearer?.[1];
}

export function responsesHandler(deps: ResponsesDeps) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const identity = deps.keys.authenticate(apiKeyOf(request));
    if (!identity) throw GatewayErrors.invalidApiKey();
    const projectHeader = request.headers["x-project-id"];
    const project =
      typeof projectHeader === "string" && projectHeader.length > 0 ? projectHeader : null;
    if (project !== null && !deps.keys.mayUseProject(identity, project)) {
      throw GatewayErrors.projectForbidden();
    }
    request.logFields = { keyId: identity.id, account: identity.account };

    const limit = deps.rateLimit.take(`key:${identity.id}`, identity.rateLimit);
    if (!limit.ok) {
      deps.metrics.rateLimited.inc({ route: "api-key" });
      throw GatewayErrors.rateLimited(limit.retryAfterSeconds);
    }
    const admitted = admit(deps, request, "api-key");
    const forwarded = await forward(deps, request, admitted);
    if (forwarded.kind === "success") {
      await deps.meter.record({
        request_id: request.id,
        account: identity.account,
        project,
        model: admitted.model.id,
        input_tokens: forwarded.usage.inputTokens,
        output_tokens: forwarded.usage.outputTokens,
        time: new Date(deps.now()).toISOString(),
      });
    }
    return sendForwarded(reply, forwarded);
  };
}
