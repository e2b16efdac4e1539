import type { z } from "zod";
import {
  CLASSIFIER_CATEGORIES_MAX,
  CLASSIFIER_INPUT_MAX,
  responsesRequestSchema,
  type ModelTask,
  type ResponsesRequest,
} from "./responses-request.js";
import { parseCandidateLabels } from "./candidate-labels.js";

/** A rejected field: what the failed envelope's `error.param` and `message` say. */
export interface FieldProblem {
  param: string | null;
  message: string;
}

export type Validation =
  { ok: true; request: ResponsesRequest } | { ok: false; problem: FieldProblem };

function paramOf(issue: z.core.$ZodIssue): string {
  return issue.path.map(String).join(".");
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
  const param = paramOf(issue);
  if (issue.code === "invalid_type" && valueAt(body, issue.path) === undefined) {
    return { param, message: `Missing required parameter: '${param}'.` };
  }
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

/** Validates a parsed JSON body; the first problem is the one reported. */
export function validateRequest(body: unknown): Validation {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return {
      ok: false,
      problem: { param: null, message: "The request body must be a JSON object." },
    };
  }
  const reserved = reservedMetadataKey(body);
  if (reserved) return { ok: false, problem: reserved };
  const parsed = responsesRequestSchema.safeParse(body);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    if (!first) return { ok: false, problem: { param: null, message: "Invalid request body." } };
    return { ok: false, problem: describe(first, body) };
  }
  return { ok: true, request: parsed.data };
}

/**
 * The classifier variant's limits (spec section 2.1 and 8), checked once the
 * model, and so its task, is known.
 */
export function checkForTask(request: ResponsesRequest, task: ModelTask): FieldProblem | null {
  if (task !== "zero-shot-classification") return null;
  if (request.input.length > CLASSIFIER_INPUT_MAX) {
    return {
      param: "input",
      message: `Invalid 'input': ${request.input.length} characters; a classifier takes 1 to ${CLASSIFIER_INPUT_MAX}.`,
    };
  }
  const labels = parseCandidateLabels(request);
  if (labels.length === 0) {
    return {
      param: "categories",
      message:
        "Missing candidate labels: send 'categories' or a comma-separated or bracketed list in 'instructions'.",
    };
  }
  if (labels.length > CLASSIFIER_CATEGORIES_MAX) {
    return {
      param: "categories",
      message: `Invalid 'categories': ${labels.length} labels; at most ${CLASSIFIER_CATEGORIES_MAX} are allowed.`,
    };
  }
  return null;
}
