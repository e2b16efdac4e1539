import { z } from "zod";
import type { Replacement, SchemaField } from "./entity-options.js";

/**
 * The answer of an entity-extraction model: the text of its one assistant
 * message (the input, the input masked, or the `schema`'s object as JSON)
 * and one annotation per entity. The runtime finds entities with UTF-16
 * offsets (JavaScript's string indices); clients get code-point offsets, as
 * the request's lengths are counted and as Python indexes a `str`, so
 * `input[start_index:end_index]` in Python is the entity.
 */

export const entityAnnotationSchema = z
  .object({
    type: z.literal("entity"),
    label: z.string(),
    start_index: z
      .number()
      .int()
      .min(0)
      .meta({ description: "Code-point offset of the entity's first character in the input" }),
    end_index: z
      .number()
      .int()
      .min(0)
      .meta({ description: "Code-point offset just past the entity's last character (exclusive)" }),
    score: z.number().min(0).max(1),
    text: z
      .string()
      .optional()
      .meta({ description: "The entity as it stands in the input; left out when masking" }),
  })
  .meta({ title: "Entity annotation" });
export type EntityAnnotation = z.infer<typeof entityAnnotationSchema>;

/** An entity as the runtime finds it: UTF-16 offsets into the input, end exclusive. */
export interface FoundEntity {
  label: string;
  start: number;
  end: number;
  score: number;
}

export interface AnswerOptions {
  mask: boolean;
  replacement: Replacement;
  schema: Record<string, SchemaField> | null;
}

export interface EntityAnswer {
  text: string;
  annotations: EntityAnnotation[];
}

/** Maps UTF-16 indices of `text` to code-point indices, in one pass over ascending indices. */
function codePointIndexer(text: string): (utf16: number) => number {
  let unit = 0;
  let points = 0;
  return (target) => {
    while (unit < target && unit < text.length) {
      const code = text.charCodeAt(unit);
      unit += code >= 0xd800 && code <= 0xdbff && unit + 1 < text.length ? 2 : 1;
      points++;
    }
    return points;
  };
}

/** `entities` sorted by start and non-overlapping, as every extractor returns them. */
export function entityAnswer(
  input: string,
  entities: readonly FoundEntity[],
  options: AnswerOptions,
): EntityAnswer {
  const toCodePoints = codePointIndexer(input);
  const annotations = entities.map((entity): EntityAnnotation => {
    const start = toCodePoints(entity.start);
    const end = toCodePoints(entity.end);
    return {
      type: "entity",
      label: entity.label,
      start_index: start,
      end_index: end,
      score: entity.score,
      ...(options.mask ? {} : { text: input.slice(entity.start, entity.end) }),
    };
  });
  if (options.schema)
    return { text: JSON.stringify(fillSchema(input, entities, options.schema)), annotations };
  if (!options.mask) return { text: input, annotations };
  return { text: masked(input, entities, annotations, options.replacement), annotations };
}

function masked(
  input: string,
  entities: readonly FoundEntity[],
  annotations: readonly EntityAnnotation[],
  replacement: Replacement,
): string {
  const parts: string[] = [];
  let at = 0;
  entities.forEach((entity, i) => {
    parts.push(input.slice(at, entity.start));
    const annotation = annotations[i]!;
    parts.push(
      replacement.kind === "label"
        ? `[${entity.label}]`
        : // Same length in code points, so the offsets still point into the masked text.
          replacement.char.repeat(annotation.end_index - annotation.start_index),
    );
    at = entity.end;
  });
  parts.push(input.slice(at));
  return parts.join("");
}

/** Each field: the best-scoring entity of its type (or null), or every one in order for a list field. */
function fillSchema(
  input: string,
  entities: readonly FoundEntity[],
  schema: Record<string, SchemaField>,
): Record<string, string | string[] | null> {
  const out: Record<string, string | string[] | null> = {};
  for (const [name, field] of Object.entries(schema)) {
    const matches = entities.filter((entity) => entity.label === field.type);
    if (field.many) {
      out[name] = matches.map((entity) => input.slice(entity.start, entity.end));
      continue;
    }
    let best: FoundEntity | null = null;
    for (const entity of matches) if (!best || entity.score > best.score) best = entity;
    out[name] = best ? input.slice(best.start, best.end) : null;
  }
  return out;
}
