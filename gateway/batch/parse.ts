import type { z } from "zod";
import { paramMessages } from "../../api/param-messages.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { repeatedQueryParam } from "../../lib/http/repeated-query.js";
import { GatewayErrors } from "../errors.js";

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let at = value;
  for (const key of path) {
    if (typeof at !== "object" || at === null) return undefined;
    at = (at as Record<PropertyKey, unknown>)[key];
  }
  return at;
}

/** The first problem of a failed parse: the field to blame and what to say of it. */
function firstProblem(
  error: z.ZodError,
  where: string,
  value: unknown,
): { message: string; param: string | null } {
  const issue = error.issues[0]!;
  const unknownKey = issue.code === "unrecognized_keys" ? issue.keys[0] : undefined;
  const param = unknownKey ?? (issue.path.map(String).join(".") || null);
  // An absent field is missing, as OpenAI and the Responses route say, not
  // "Invalid input: expected ..." as if a wrong value had been sent.
  if (!unknownKey && param !== null && valueAt(value, issue.path) === undefined) {
    return { message: paramMessages.missing(param), param };
  }
  const message = unknownKey
    ? `Unknown parameter: '${unknownKey}'.`
    : `Invalid '${param ?? where}': ${issue.message}.`;
  return { message, param };
}

/** Parses a JSON body with its zod schema; the first problem is a 400 `invalid_request` naming the field. */
export function parseOr400<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const { message, param } = firstProblem(result.error, "body", value ?? {});
  throw HttpErrors.invalidRequest(message, param);
}

/**
 * Parses a query string with its zod schema; the first problem is a 400
 * `invalid_query` naming the parameter, as every other listing answers.
 */
export function parseQueryOr400<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const repeated = repeatedQueryParam(value);
  if (repeated !== null) {
    throw GatewayErrors.repeatedQuery(repeated);
  }
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const { message, param } = firstProblem(result.error, "query", value ?? {});
  throw GatewayErrors.invalidQuery(message, param ?? "query");
}
