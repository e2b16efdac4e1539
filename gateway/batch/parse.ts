import type { z } from "zod";
import { HttpErrors } from "../../lib/http/http-errors.js";

/** Parses a body or query with its zod schema; the first problem is a 400 naming the field. */
export function parseOr400<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const unknownKey = issue.code === "unrecognized_keys" ? issue.keys[0] : undefined;
  const param = unknownKey ?? (issue.path.map(String).join(".") || null);
  const message = unknownKey
    ? `Unknown parameter: '${unknownKey}'.`
    : `Invalid '${param ?? "body"}': ${issue.message}.`;
  throw HttpErrors.invalidRequest(message, param);
}
