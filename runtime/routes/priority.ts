import type { FastifyRequest } from "fastify";
import { PRIORITY_HEADER } from "../../api/runtime-wire.js";
import type { Priority } from "../engine/admission-queue.js";

/**
 * The lane a request waits in: `batch` when the gateway's batch worker sent
 * it, else interactive. Only the gateway reaches a runtime, and it builds
 * the headers it forwards itself, so a caller cannot claim either lane.
 */
export function priorityOf(request: FastifyRequest): Priority {
  return request.headers[PRIORITY_HEADER] === "batch" ? "batch" : "interactive";
}
