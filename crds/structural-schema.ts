import { z } from "zod";

/**
 * Turns a zod schema into a Kubernetes *structural* OpenAPI v3 schema, the
 * only kind an apiextensions.k8s.io/v1 CRD accepts. zod's own OpenAPI 3.0
 * output is close; what differs is fixed here or refused with the path, so
 * that a schema change the API server would reject fails at generation time
 * instead of at `kubectl apply`:
 * https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema
 */

/** A node of the generated schema (a subset of JSONSchemaProps). */
export type SchemaNode = { [keyword: string]: unknown };

/** Extra keywords zod cannot express (CEL rules, list types), by dotted path ("spec.autoscaling"). */
export type Extensions = Record<string, SchemaNode>;

/**
 * The keywords we emit, in the order they are written (a stable order keeps
 * the generated YAML diffable). Anything else zod produces is refused, since
 * the API server would either reject it or silently prune it.
 */
const KEYWORD_ORDER = [
  "description",
  "type",
  "format",
  "nullable",
  "enum",
  "default",
  "minimum",
  "exclusiveMinimum",
  "maximum",
  "exclusiveMaximum",
  "minLength",
  "maxLength",
  "pattern",
  "minItems",
  "maxItems",
  "minProperties",
  "maxProperties",
  "multipleOf",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-map-type",
  "x-kubernetes-validations",
] as const;
const ALLOWED = new Set<string>(KEYWORD_ORDER);

/** Formats the API server validates; zod adds others (e.g. "includes") next to a pattern that already says it all. */
const KUBERNETES_FORMATS = new Set([
  "bsonobjectid",
  "uri",
  "email",
  "hostname",
  "ipv4",
  "ipv6",
  "cidr",
  "mac",
  "uuid",
  "uuid3",
  "uuid4",
  "uuid5",
  "isbn",
  "isbn10",
  "isbn13",
  "creditcard",
  "ssn",
  "hexcolor",
  "rgbcolor",
  "byte",
  "password",
  "date",
  "duration",
  "date-time",
  "int32",
  "int64",
  "float",
  "double",
]);

/** Marks, during zod's conversion, the nodes whose zod schema has a refine that JSON Schema cannot carry. */
const REFINED = "x-modelgate-refined";

export class StructuralSchemaError extends Error {
  constructor(path: string, problem: string) {
    super(`${path || "<root>"}: ${problem}`);
    this.name = "StructuralSchemaError";
  }
}

/**
 * The structural schema of `schema` as its *input* (fields with a default are
 * optional, as they are for a client). Every zod refine must have a CEL twin
 * in `extensions` at the same path, and every extension path must exist.
 */
export function toStructuralSchema(schema: z.ZodType, extensions: Extensions = {}): SchemaNode {
  const json = z.toJSONSchema(schema, {
    target: "openapi-3.0",
    io: "input",
    unrepresentable: "throw",
    override: (ctx) => {
      const checks = ctx.zodSchema._zod.def.checks ?? [];
      if (checks.some((c) => c._zod.def.check === "custom")) ctx.jsonSchema[REFINED] = true;
    },
  }) as SchemaNode;
  delete json.$schema;
  const unused = new Set(Object.keys(extensions));
  const result = convert(json, "", extensions, unused);
  if (unused.size > 0) {
    throw new StructuralSchemaError(
      [...unused].join(", "),
      "extension for a path the schema lacks",
    );
  }
  return result;
}

function convert(node: SchemaNode, path: string, ext: Extensions, unused: Set<string>): SchemaNode {
  const out: SchemaNode = { ...node };
  const fail = (problem: string): never => {
    throw new StructuralSchemaError(path, problem);
  };

  if (REFINED in out) {
    delete out[REFINED];
    if (!Array.isArray(ext[path]?.["x-kubernetes-validations"])) {
      fail("the zod schema has a refine: add the same rule as CEL (x-kubernetes-validations)");
    }
  }
  if ("$ref" in out) fail("$ref is not structural: give the schema no id so zod inlines it");
  for (const junctor of ["anyOf", "oneOf", "allOf", "not"]) {
    if (junctor in out)
      fail(`${junctor} (a union or intersection) is not structural: use z.enum or one object`);
  }
  if (Array.isArray(out.type)) fail("a list of types is not structural");

  // z.any()/z.unknown(): the only untyped node Kubernetes allows keeps unknown fields.
  if (out.type === undefined) {
    const constraints = Object.keys(out).filter((k) => k !== "description" && k !== "default");
    if (constraints.length > 0) fail(`no type, but ${constraints.join(", ")}`);
    out["x-kubernetes-preserve-unknown-fields"] = true;
  }

  // z.int() adds ±Number.MAX_SAFE_INTEGER: a JavaScript limit, not a rule of the resource.
  if (out.type === "integer") {
    if (out.minimum === -Number.MAX_SAFE_INTEGER) delete out.minimum;
    if (out.maximum === Number.MAX_SAFE_INTEGER) delete out.maximum;
  }

  if (typeof out.format === "string" && !KUBERNETES_FORMATS.has(out.format)) {
    if (typeof out.pattern !== "string") fail(`format ${out.format} is unknown to Kubernetes`);
    delete out.format;
  }
  // The API server compiles patterns with Go's RE2: no lookaround, no backreferences.
  if (typeof out.pattern === "string" && /\(\?<?[=!]|\\[1-9]/.test(out.pattern)) {
    fail(`pattern ${out.pattern} needs a regex feature RE2 lacks`);
  }
  if (out.uniqueItems === true) fail("uniqueItems is forbidden (quadratic to check)");
  delete out.uniqueItems;

  if (isNode(out.properties)) {
    // properties and additionalProperties are mutually exclusive: a closed
    // object is the default (unknown fields are pruned), an open one is said
    // with x-kubernetes-preserve-unknown-fields.
    const extra = out.additionalProperties;
    delete out.additionalProperties;
    if (extra === true || (isNode(extra) && Object.keys(extra).length === 0)) {
      out["x-kubernetes-preserve-unknown-fields"] = true;
    } else if (isNode(extra)) {
      fail("typed additionalProperties next to properties is not structural");
    }
    out.properties = Object.fromEntries(
      Object.entries(out.properties).map(([name, child]) => [
        name,
        convert(asNode(child, join(path, name)), join(path, name), ext, unused),
      ]),
    );
  } else if (isNode(out.additionalProperties)) {
    out.additionalProperties = convert(out.additionalProperties, join(path, "*"), ext, unused);
  } else if (out.additionalProperties !== undefined) {
    fail("additionalProperties must be a schema");
  }
  if (out.items !== undefined) {
    if (!isNode(out.items)) fail("items must be one schema (tuples are not structural)");
    out.items = convert(asNode(out.items, path), `${path}[*]`, ext, unused);
  }

  const extension = ext[path];
  if (extension) {
    unused.delete(path);
    Object.assign(out, extension);
  }

  const unknown = Object.keys(out).filter((k) => !ALLOWED.has(k));
  if (unknown.length > 0) fail(`keywords Kubernetes does not accept here: ${unknown.join(", ")}`);
  return ordered(out);
}

function join(path: string, name: string): string {
  return path === "" ? name : `${path}.${name}`;
}

function isNode(value: unknown): value is SchemaNode {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function asNode(value: unknown, path: string): SchemaNode {
  if (!isNode(value)) throw new StructuralSchemaError(path, "not a schema object");
  return value;
}

function ordered(node: SchemaNode): SchemaNode {
  const out: SchemaNode = {};
  for (const key of KEYWORD_ORDER) if (key in node) out[key] = node[key];
  return out;
}
