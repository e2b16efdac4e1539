import { SINGLE_LABEL_PATTERN, labelListPattern, splitList } from "./candidate-labels.js";

/**
 * The entity-extraction options that ride in `metadata` as strings, parsed
 * by one pure function that the request schema (at the gateway and the
 * runtime) and the runtime's extraction both call, so a value is read the
 * same way everywhere. Each problem names its `metadata.<key>`. What depends
 * on the model (which labels it has) is checked by the runtime.
 */

/** Most labels one request may ask for (a span model scores every label on every span). */
export const ENTITY_LABELS_MAX = 25;
/** Most fields of a `schema`, and the longest `schema` string. */
export const SCHEMA_FIELDS_MAX = 20;
export const SCHEMA_MAX_LENGTH = 4096;
export const DEFAULT_THRESHOLD = 0.5;

/** A decimal number (optionally with an exponent); the range is checked after. */
export const THRESHOLD_PATTERN = /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
export const ENTITY_LABEL_LIST_PATTERN = labelListPattern(ENTITY_LABELS_MAX);
/** The `replacement_char` that asks for a placeholder per entity (`[EMAIL]`) instead of a character. */
export const LABEL_PLACEHOLDER = "[label]";
/** One character that is not a control character or whitespace, or the placeholder keyword. */
export const REPLACEMENT_PATTERN = /^(?:[^\p{Cc}\p{Cf}\p{Z}\s]|\[label\])$/u;

export interface Usecase {
  /** What the preset is for, as the docs list it. */
  description: string;
  /** Types it asks a token-classification model for (those the model has are used). */
  tokenLabels: readonly string[];
  /** Labels it asks a span (zero-shot) model for. */
  spanLabels: readonly string[];
  /** Masking, and with what, unless the request says otherwise. */
  mask: boolean;
  replacement: Replacement;
}

export type Replacement = { kind: "char"; char: string } | { kind: "label" };
export const DEFAULT_REPLACEMENT: Replacement = { kind: "char", char: "*" };

const ADDRESS_TYPES = [
  "BUILDING_NUMBER",
  "STREET_NAME",
  "SECONDARY_ADDRESS",
  "CITY",
  "STATE",
  "ZIP_CODE",
];
const CONTACT_TYPES = ["GIVEN_NAME", "SURNAME", "EMAIL", "PHONE"];

/** The named presets of `usecase`; docs/entity-extraction.md lists the same. */
export const USECASES = {
  pii: {
    description: "personal data to redact: names, contact details, identifiers, addresses",
    tokenLabels: [
      ...CONTACT_TYPES,
      "URL",
      "TAX_ID",
      "BANK_ACCOUNT",
      "ROUTING_NUMBER",
      "GOVERNMENT_ID",
      "PASSPORT",
      "DRIVERS_LICENSE",
      ...ADDRESS_TYPES,
    ],
    spanLabels: [
      "person",
      "email",
      "phone number",
      "address",
      "url",
      "tax id",
      "bank account number",
      "government id",
      "passport number",
      "driver license number",
    ],
    mask: true,
    replacement: { kind: "label" },
  },
  contact: {
    description: "who someone is and how to reach them: names, e-mail addresses, phone numbers",
    tokenLabels: CONTACT_TYPES,
    spanLabels: ["person", "email", "phone number"],
    mask: false,
    replacement: DEFAULT_REPLACEMENT,
  },
  address: {
    description: "postal addresses, part by part",
    tokenLabels: ADDRESS_TYPES,
    spanLabels: ["street address", "city", "state", "zip code"],
    mask: false,
    replacement: DEFAULT_REPLACEMENT,
  },
} as const satisfies Record<string, Usecase>;
export type UsecaseName = keyof typeof USECASES;
export const USECASE_NAMES = Object.keys(USECASES) as [UsecaseName, ...UsecaseName[]];

/** One `schema` field: the entity type it takes, and whether it lists every match or takes the best. */
export interface SchemaField {
  type: string;
  many: boolean;
}

/** The options as the request gives them; null where it gives none. */
export interface ExtractionOptions {
  usecase: UsecaseName | null;
  labels: string[] | null;
  threshold: number;
  mask: boolean;
  replacement: Replacement;
  schema: Record<string, SchemaField> | null;
}

export interface OptionProblem {
  /** The metadata key at fault. */
  key: string;
  message: string;
}

export type ParsedOptions =
  { ok: true; options: ExtractionOptions } | { ok: false; problem: OptionProblem };

const fail = (key: string, message: string): ParsedOptions => ({
  ok: false,
  problem: { key, message },
});

function parseThreshold(value: string): number | null {
  if (!THRESHOLD_PATTERN.test(value)) return null;
  const number = Number(value);
  return number >= 0 && number <= 1 ? number : null;
}

function parseSchema(value: string): Record<string, SchemaField> | string {
  if (value.length > SCHEMA_MAX_LENGTH) {
    return `is ${value.length} characters; at most ${SCHEMA_MAX_LENGTH} are allowed`;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return 'must be a JSON object of field names to entity types, such as {"email": "EMAIL"}';
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return 'must be a JSON object of field names to entity types, such as {"email": "EMAIL"}';
  }
  const entries = Object.entries(parsed);
  if (entries.length === 0 || entries.length > SCHEMA_FIELDS_MAX) {
    return `must have 1 to ${SCHEMA_FIELDS_MAX} fields; it has ${entries.length}`;
  }
  const fields: Record<string, SchemaField> = {};
  for (const [name, type] of entries) {
    if (name.length === 0 || name.length > 64 || name === "__proto__") {
      return `field names are 1 to 64 characters (and not __proto__); got ${JSON.stringify(name)}`;
    }
    const many = Array.isArray(type);
    const single: unknown = many ? (type.length === 1 ? type[0] : undefined) : type;
    if (typeof single !== "string" || !SINGLE_LABEL_PATTERN.test(single)) {
      return `field ${JSON.stringify(name)} must be one entity type ("EMAIL"), or a list of one (["EMAIL"]) for every match`;
    }
    fields[name] = { type: splitList(single)[0]!, many };
  }
  return fields;
}

/**
 * Reads the options from `metadata` (absent keys take their defaults, or the
 * usecase's). The first problem found is returned, naming its key.
 */
export function parseExtractionOptions(
  metadata: Readonly<Record<string, unknown>> | undefined,
): ParsedOptions {
  const get = (key: string): string | undefined => {
    const value = metadata?.[key];
    return typeof value === "string" ? value : undefined;
  };
  let usecase: UsecaseName | null = null;
  const usecaseValue = get("usecase");
  if (usecaseValue !== undefined) {
    if (!Object.hasOwn(USECASES, usecaseValue)) {
      return fail("usecase", `must be one of ${USECASE_NAMES.join(", ")}`);
    }
    usecase = usecaseValue as UsecaseName;
  }
  const preset: Usecase | null = usecase ? USECASES[usecase] : null;

  let labels: string[] | null = null;
  const labelsValue = get("labels");
  if (labelsValue !== undefined) {
    if (!ENTITY_LABEL_LIST_PATTERN.test(labelsValue)) {
      return fail(
        "labels",
        `must be 1 to ${ENTITY_LABELS_MAX} comma-separated labels, optionally in brackets ("[EMAIL, PHONE]")`,
      );
    }
    labels = [...new Set(splitList(labelsValue))];
  }

  let threshold = DEFAULT_THRESHOLD;
  const thresholdValue = get("threshold");
  if (thresholdValue !== undefined) {
    const parsed = parseThreshold(thresholdValue);
    if (parsed === null) return fail("threshold", 'must be a number from 0 to 1, such as "0.5"');
    threshold = parsed;
  }

  let mask = preset?.mask ?? false;
  const maskValue = get("mask");
  if (maskValue !== undefined) {
    if (maskValue !== "true" && maskValue !== "false")
      return fail("mask", 'must be "true" or "false"');
    mask = maskValue === "true";
  }

  let replacement = preset?.replacement ?? DEFAULT_REPLACEMENT;
  const replacementValue = get("replacement_char");
  if (replacementValue !== undefined) {
    if (!REPLACEMENT_PATTERN.test(replacementValue)) {
      return fail(
        "replacement_char",
        `must be one character (not whitespace or a control character), repeated to each entity's length, or "${LABEL_PLACEHOLDER}" for a placeholder such as [EMAIL]`,
      );
    }
    if (!mask)
      return fail("replacement_char", 'applies only when masking: set metadata.mask to "true"');
    replacement =
      replacementValue === LABEL_PLACEHOLDER
        ? { kind: "label" }
        : { kind: "char", char: replacementValue };
  }

  let schema: Record<string, SchemaField> | null = null;
  const schemaValue = get("schema");
  if (schemaValue !== undefined) {
    const parsed = parseSchema(schemaValue);
    if (typeof parsed === "string") return fail("schema", parsed);
    if (labels !== null)
      return fail("schema", "names its own entity types: send labels or schema, not both");
    if (usecase !== null)
      return fail("schema", "names its own entity types: send usecase or schema, not both");
    if (mask)
      return fail("mask", "does not apply with schema, whose answer is a JSON object of fields");
    schema = parsed;
  }
  return { ok: true, options: { usecase, labels, threshold, mask, replacement, schema } };
}
