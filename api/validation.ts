import type { z } from "zod";
import { requestSchemaFor, type ModelTask, type ResponsesRequest } from "./responses-request.js";

/**
 * Validation of a parsed JSON body against the request schema of a task,
 * with the first problem phrased for the failed envelope: `error.param`
 * names the field, `message` says what is wrong with it.
 */

/** A rejected field: what the failed envelope's `error.param` and `message` say. */
export interface FieldProblem {
  param: string | null;
  message: string;
}

export type Validation =
  { ok: true; request: ResponsesRequest } | { ok: false; problem: FieldProblem };

function paramOf(path: readonly PropertyKey[]): string {
  return path.map(String).join(".");
}

function valueAt(body: object, path: readonly PropertyKey[]): unknown {
  let value: unknown = body;
  for (const key of path) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

function describe(issue: z.core.$ZodIssue, body: object): FieldProblem {
  let path = issue.path;
  // A rule with alternatives (the classifier's labels) fails as a whole; it
  // names the field its first alternative asks for.
  if (issue.code === "invalid_union" && path.length === 0) {
    path = issue.errors[0]?.[0]?.path ?? [];
  }
  const param = paramOf(path);
  if (issue.code === "invalid_type" && valueAt(body, path) === undefined) {
    return { param, message: `Missing required parameter: '${param}'.` };
  }
  if (param === "") return { param: null, message: issue.message };
  return { param, message: `Invalid '${param}': ${issue.message}` };
}

/**
 * JSON.parse keeps `"__proto__"` as an own key, but assigning it to an object
 * sets the prototype instead: it would vanish from validation and the echo.
 */
function reservedMetadataKey(body: object): FieldProblem | null {
  const metadata = (body as { metadata?: unknown }).metadata;
  if (typeof metadata === "object" && metadata !== null && Object.hasOwn(metadata, "__proto__")) {
    return {
      param: "metadata.__proto__",
      message: "Invalid 'metadata.__proto__': this key is reserved.",
    };
  }
  return null;
}

const NOT_AN_OBJECT: Validation = {
  ok: false,
  problem: { param: null, message: "The request body must be a JSON object." },
};

/**
 * Validates a parsed JSON body with the schema of `task` (text generation
 * when no model, and so no task, is known yet); the first problem is the one
 * reported.
 */
export function validateRequest(body: unknown, task: ModelTask = "text-generation"): Validation {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return NOT_AN_OBJECT;
  const reserved = reservedMetadataKey(body);
  if (reserved) return { ok: false, problem: reserved };
  const parsed = requestSchemaFor(task).safeParse(body);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    if (!first) return { ok: false, problem: { param: null, message: "Invalid request body." } };
    return { ok: false, problem: describe(first, body) };
  }
  return { ok: true, request: parsed.data };
}

/**
 * The checks of a task beyond the text-generation schema (the classifier
 * variant's input length and labels), for a request already validated as
 * text generation before its model was known.
 */
export function checkForTask(request: ResponsesRequest, task: ModelTask): FieldProblem | null {
  if (task === "text-generation") return null;
  const validation = validateRequest(request, task);
  return validation.ok ? null : validation.problem;
}
