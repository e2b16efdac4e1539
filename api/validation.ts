import type { z } from "zod";
import { paramMessages } from "./param-messages.js";
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

/**
 * A field that takes one of several shapes (`input`: a string or a list of
 * items) fails as a whole. When the value's type fits exactly one shape (a
 * list, where a string or a list is allowed), that shape's problem is the
 * one to name: the item that is wrong, not the field.
 */
function deepest(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== "invalid_union" || issue.path.length === 0) return issue;
  const fitting = issue.errors.filter(
    (alternative) => !(alternative[0]?.code === "invalid_type" && alternative[0].path.length === 0),
  );
  const first = fitting.length === 1 ? fitting[0]![0] : undefined;
  if (!first) return issue;
  return deepest({ ...first, path: [...issue.path, ...first.path] });
}

function describe(found: z.core.$ZodIssue, body: object): FieldProblem {
  const issue = deepest(found);
  let path = issue.path;
  // A rule with alternatives (the classifier's labels) fails as a whole; it
  // names the field its first alternative asks for.
  if (issue.code === "invalid_union" && path.length === 0) {
    path = issue.errors[0]?.[0]?.path ?? [];
  }
  const param = paramOf(path);
  // A field of several shapes that is absent is missing, like a field of one.
  const missing =
    issue.code === "invalid_type" || (issue.code === "invalid_union" && issue.path.length > 0);
  if (missing && valueAt(body, path) === undefined) {
    return { param, message: paramMessages.missing(param) };
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
 * text generation before its model was known. Given the body as it was
 * sent: the text-generation schema turns a list `input` into a string.
 */
export function checkForTask(request: unknown, task: ModelTask): FieldProblem | null {
  if (task === "text-generation") return null;
  const validation = validateRequest(request, task);
  return validation.ok ? null : validation.problem;
}
