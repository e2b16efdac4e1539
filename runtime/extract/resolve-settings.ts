import { USECASES, type ExtractionOptions, type SchemaField } from "../../api/entity-options.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import type { EntityExtractor, ExtractionSettings } from "./extractor.js";

/**
 * The request's options against the model that will read them: which labels
 * to ask for (from `labels`, a `usecase` or a `schema`), in the model's own
 * spelling for a fixed-label model. An unknown label is a 400 that lists the
 * labels the model has.
 */
export interface ResolvedExtraction {
  settings: ExtractionSettings;
  /** The schema with each field's type in the model's spelling. */
  schema: Record<string, SchemaField> | null;
}

export function resolveExtraction(
  options: ExtractionOptions,
  extractor: Pick<EntityExtractor, "method" | "labels">,
): ResolvedExtraction {
  const known = extractor.labels;
  const canonical = (label: string, key: string): string => {
    if (known === null) return label;
    const found = known.find((k) => k.toLowerCase() === label.toLowerCase());
    if (found === undefined) {
      throw HttpErrors.invalidRequest(
        `Invalid 'metadata.${key}': this model has no label '${label}'; its labels are ${known.join(", ")}.`,
        `metadata.${key}`,
      );
    }
    return found;
  };

  if (options.schema) {
    const schema: Record<string, SchemaField> = {};
    for (const [name, field] of Object.entries(options.schema)) {
      schema[name] = { ...field, type: canonical(field.type, "schema") };
    }
    const labels = [...new Set(Object.values(schema).map((field) => field.type))];
    return { settings: { labels, threshold: options.threshold }, schema };
  }
  if (options.labels) {
    const labels = [...new Set(options.labels.map((label) => canonical(label, "labels")))];
    return { settings: { labels, threshold: options.threshold }, schema: null };
  }
  if (options.usecase) {
    const preset = USECASES[options.usecase];
    let labels: string[];
    if (known === null) labels = [...preset.spanLabels];
    else {
      const wanted = new Set(preset.tokenLabels.map((label) => label.toLowerCase()));
      labels = known.filter((label) => wanted.has(label.toLowerCase()));
      if (labels.length === 0) {
        throw HttpErrors.invalidRequest(
          `Invalid 'metadata.usecase': '${options.usecase}' asks for ${preset.tokenLabels.join(", ")}, and this model has none of them; its labels are ${known.join(", ")}.`,
          "metadata.usecase",
        );
      }
    }
    return { settings: { labels, threshold: options.threshold }, schema: null };
  }
  if (known === null) {
    throw HttpErrors.invalidRequest(
      "Missing entity labels: a zero-shot extraction model needs metadata.labels, metadata.usecase or metadata.schema.",
      "metadata.labels",
    );
  }
  return { settings: { labels: null, threshold: options.threshold }, schema: null };
}
