import type { FastifyReply, FastifyRequest } from "fastify";
import type { ChatMessage } from "../../api/input-items.js";
import type { z } from "zod";
import {
  inputItemsQuerySchema,
  noQuerySchema,
  pageOfItems,
  REPEATABLE_QUERY_PARAMS,
  retrieveQuerySchema,
  storedItemsOf,
  type StoredInputItem,
} from "../../api/stored-responses.js";
import { errorText } from "../../lib/error-text.js";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import { repeatedQueryParam } from "../../lib/http/repeated-query.js";
import { GatewayErrors } from "../errors.js";
import type { RoutableModel } from "../registry/registry.js";
import type { ResponseStore } from "../store/response-store.js";
import type { StoredResponseRow } from "../store/stored-responses.js";
import { isStoreUnreachable } from "../store/store-unreachable.js";
import { continuedBody, READ_BACK_FACTOR, turnsOf } from "./conversation.js";
import { ownerOf } from "./stored-owner.js";

/**
 * Stored responses on both routes: the reads and writes of
 * `/v1/responses/{id}` (and `/pay/v1/…`), storing an answer, and the body
 * of a request that continues a conversation. Without a store (`responses`
 * null) nothing is stored and every id is unknown.
 */
export interface StoredDeps {
  responses: ResponseStore | null;
}

function ownerOfRequest(request: FastifyRequest): string {
  if (!request.caller) throw new Error(`route ${request.routeOptions.url} has no caller`);
  return ownerOf(request.caller);
}

function idOf(request: FastifyRequest): string {
  return (request.params as { response_id: string }).response_id;
}

/** The route's query, or the 400 naming its first bad, repeated or unknown parameter. */
function queryOf<T extends z.ZodType>(schema: T, request: FastifyRequest): z.infer<T> {
  const raw = (request.query ?? {}) as Record<string, unknown>;
  const repeated = repeatedQueryParam(raw, REPEATABLE_QUERY_PARAMS);
  if (repeated !== null) {
    throw GatewayErrors.repeatedQuery(repeated);
  }
  const query = schema.safeParse(raw);
  if (query.success) return query.data;
  const issue = query.error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    const param = issue.keys[0]!;
    throw GatewayErrors.invalidQuery(`Unknown query parameter '${param}'.`, param);
  }
  const param = String(issue.path[0] ?? "query");
  throw GatewayErrors.invalidQuery(`Invalid '${param}': ${issue.message}.`, param);
}

export function retrieveHandler(deps: StoredDeps) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    queryOf(retrieveQuerySchema, request);
    const id = idOf(request);
    const row = await deps.responses?.get(id, ownerOfRequest(request));
    if (!row) throw GatewayErrors.responseNotFound(id, null);
    return reply.type("application/json").send(row.response);
  };
}

export function deleteHandler(deps: StoredDeps) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    queryOf(noQuerySchema, request);
    const id = idOf(request);
    const deleted = (await deps.responses?.delete(id, ownerOfRequest(request))) ?? false;
    if (!deleted) throw GatewayErrors.responseNotFound(id, null);
    return reply.send({ id, object: "response", deleted: true });
  };
}

/** Nothing here runs in the background, so the caller's response is never cancellable. */
export function cancelHandler(deps: StoredDeps) {
  return async (request: FastifyRequest): Promise<never> => {
    queryOf(noQuerySchema, request);
    const id = idOf(request);
    const row = await deps.responses?.get(id, ownerOfRequest(request));
    if (!row) throw GatewayErrors.responseNotFound(id, null);
    throw GatewayErrors.responseNotCancellable(id);
  };
}

export function inputItemsHandler(deps: StoredDeps) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const query = queryOf(inputItemsQuerySchema, request);
    const id = idOf(request);
    const row = await deps.responses?.get(id, ownerOfRequest(request));
    if (!row) throw GatewayErrors.responseNotFound(id, null);
    const page = pageOfItems(JSON.parse(row.inputItems) as StoredInputItem[], query);
    if (!page.ok) throw GatewayErrors.inputItemNotFound(query.after ?? "");
    return reply.send(page.list);
  };
}

interface AdmittedBody {
  input: string;
  input_messages?: ChatMessage[];
  store?: boolean;
  previous_response_id?: string | null;
  truncation?: "auto" | "disabled";
}

/** What to forward, and the stored turn it continues (null for a new conversation). */
export interface Forwarded {
  body: Buffer;
  /**
   * The previous turn as stored: its `servedBy` is the runtime endpoint that
   * answered it, the one that may still hold the conversation's prefix.
   */
  continues: StoredResponseRow | null;
}

/**
 * The bytes to forward: the caller's own, or, with `previous_response_id`,
 * the stored conversation before its input, within `bodyLimit` bytes
 * (conversation.ts). An id that is not the caller's live stored response is
 * a 404 naming `previous_response_id`.
 */
export async function forwardBodyOf(
  deps: StoredDeps & { bodyLimit: number },
  request: FastifyRequest,
  model: Pick<RoutableModel, "id" | "task" | "overflow">,
): Promise<Forwarded> {
  const raw = request.rawBody ?? Buffer.from(JSON.stringify(request.body));
  const body = request.body as AdmittedBody;
  const previous = body.previous_response_id;
  if (typeof previous !== "string") return { body: raw, continues: null };
  const conversation = await deps.responses?.conversation(
    previous,
    ownerOfRequest(request),
    READ_BACK_FACTOR * deps.bodyLimit,
  );
  if (!conversation) throw GatewayErrors.responseNotFound(previous, "previous_response_id");
  if (model.task !== "text-generation") throw GatewayErrors.conversationUnsupported(model.id);
  const continued = continuedBody(raw, turnsOf(conversation.turns), {
    limitBytes: deps.bodyLimit,
    canDrop: model.overflow === "truncate" && body.truncation !== "disabled",
    olderUnread: conversation.olderUnread,
  });
  if (continued.kind === "too-large") throw GatewayErrors.conversationTooLarge(deps.bodyLimit);
  return { body: continued.body, continues: conversation.turns.at(-1) ?? null };
}

/**
 * Keeps an answered response (`store` true, the default) before the answer
 * leaves, so that a retrieve right after the create finds it on any replica
 * sharing the store: one INSERT. A failure is logged and the answer still
 * goes out: it was served and is billed; only its retrieval is lost.
 */
export async function storeAnswer(
  deps: StoredDeps,
  request: FastifyRequest,
  response: unknown,
  json: string,
  servedBy: string | null,
): Promise<void> {
  const body = request.body as AdmittedBody;
  if (!deps.responses || body.store === false) return;
  const answer = response as { id?: unknown; object?: unknown };
  // A classifier's bare label-to-score object is not a response: nothing to retrieve.
  if (answer?.object !== "response" || typeof answer.id !== "string") return;
  const turns = body.input_messages ?? [{ role: "user" as const, content: body.input }];
  try {
    await deps.responses.save({
      id: answer.id,
      owner: ownerOfRequest(request),
      model: request.model!.id,
      previousResponseId: body.previous_response_id ?? null,
      inputItems: JSON.stringify(storedItemsOf(turns)),
      response: json,
      servedBy,
    });
  } catch (error) {
    // An outage is logged once, when the store is found down (store-opener.ts),
    // not once per answer it costs; anything else is a fault to see.
    if (isStoreUnreachable(error)) {
      request.log.debug(
        { ...logFieldsOf(request), reason: errorText(error) },
        "response not stored",
      );
    } else {
      request.log.error({ ...logFieldsOf(request), err: error }, "response not stored");
    }
  }
}
