import type { FastifyReply } from "fastify";
import { newId } from "../../api/responses-response.js";
import { RESPONSE_ID_HEADER, isResponseId } from "../../api/runtime-wire.js";

/**
 * The id this answer goes out under: the gateway's when it sent a well-formed
 * one (usage is keyed by it), else one of our own. Kept on the request, so
 * an error envelope answered in its place (a 420) carries it too.
 */
export function adoptResponseId(reply: FastifyReply): string {
  const given = reply.request.headers[RESPONSE_ID_HEADER];
  return (reply.request.responseId = isResponseId(given) ? given : newId("resp"));
}
