import type { FastifyRequest } from "fastify";
import type { CodedError } from "../../lib/coded-error.js";
import type { KeyStore } from "../auth/key-store.js";
import { GatewayErrors, type ProjectHeader } from "../errors.js";

/**
 * API-key routes (spec 5.1): `x-api-key` (or the OpenAI clients'
 * `Authorization: Bearer <key>`) → 401, then `x-project-id` → 403. Runs at
 * `onRequest`, before the body is read: an unauthenticated caller costs no
 * body parsing and learns nothing about the API from 400s. Synchronous, and
 * only on the routes that take a key: route-hooks.ts runs it, then the
 * key's request limit, as one hook.
 */
export function authenticateApiKey(keys: KeyStore): (request: FastifyRequest) => CodedError | null {
  return (request) => {
    const result = keys.authenticate(apiKeyOf(request));
    if (!result.ok) {
      // The client learns only "invalid API key"; operators see the reason.
      if (result.reason === "revoked" || result.reason === "unknown") {
        request.log.info({ reason: result.reason, keyId: result.keyId }, "API key refused");
      }
      return GatewayErrors.invalidApiKey();
    }
    const { key } = result;
    // Who called goes on every later line of this request (cheaper than a child logger).
    request.logFields = { keyId: key.id, account: key.account };
    const { header, value } = projectOf(request);
    const decision = keys.authorizeProject(key, value);
    if (!decision.ok) return GatewayErrors.projectForbidden(header);
    const project = decision.project ?? null;
    request.caller = {
      kind: "api-key",
      keyId: key.id,
      account: key.account,
      project,
      admin: key.admin,
      rateLimit: key.rateLimit,
      projectRateLimit: project === null ? undefined : key.projectRateLimits?.get(project),
    };
    return null;
  };
}

/**
 * `x-project-id`, or the OpenAI clients' `OpenAI-Project` (sent when a
 * client is made with a project) when that is absent: as with the key, the
 * spec's header wins.
 */
function projectOf(request: FastifyRequest): {
  header: ProjectHeader;
  value: string | string[] | undefined;
} {
  const own = request.headers["x-project-id"];
  if (own !== undefined && own !== "") return { header: "x-project-id", value: own };
  return { header: "openai-project", value: request.headers["openai-project"] };
}

/** `x-api-key`, or the OpenAI clients' `Authorization: Bearer <key>`. */
export function apiKeyOf(request: FastifyRequest): string | undefined {
  const header = request.headers["x-api-key"];
  if (typeof header === "string" && header.length > 0) return header;
  const authorization = request.headers.authorization;
  const bearer = typeof authorization === "string" ? /^Bearer\s+(\S+)$/i.exec(authorization) : null;
  return bearer?.[1];
}
