import { Ajv } from "ajv";
import type { SchemaNode } from "../../crds/structural-schema.js";

/**
 * The API server's checks of a custom resource, as far as they run without an
 * API server: the CRD's OpenAPI schema (through ajv, defaults applied first as
 * the server does when it decodes) and then its CEL rules, by a tiny
 * evaluator that knows only the one rule form the CRD uses. A real API server
 * check comes with the test cluster (test/cluster/).
 */
export type Verdict = { ok: true } | { ok: false; errors: string[] };

export function kubeValidator(openApiSchema: SchemaNode): (object: unknown) => Verdict {
  const ajv = new Ajv({ useDefaults: true, allErrors: true, strict: true });
  const validate = ajv.compile(toAjvSchema(openApiSchema));
  return (object) => {
    const defaulted: unknown = structuredClone(object);
    if (!validate(defaulted)) {
      return {
        ok: false,
        errors: (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`),
      };
    }
    const errors = celErrors(openApiSchema, defaulted, "");
    return errors.length === 0 ? { ok: true } : { ok: false, errors };
  };
}

/** OpenAPI 3.0 → what ajv (draft-07) reads: boolean exclusive bounds become numbers; x-kubernetes-* go. */
export function toAjvSchema(node: SchemaNode): SchemaNode {
  const out: SchemaNode = {};
  for (const [key, value] of Object.entries(node)) {
    if (key.startsWith("x-kubernetes-")) continue;
    if (key === "exclusiveMinimum" || key === "exclusiveMaximum") continue;
    if (key === "properties") {
      out[key] = Object.fromEntries(
        Object.entries(value as Record<string, SchemaNode>).map(([k, v]) => [k, toAjvSchema(v)]),
      );
    } else if (key === "items" || key === "additionalProperties") {
      out[key] = toAjvSchema(value as SchemaNode);
    } else {
      out[key] = value;
    }
  }
  if (node.exclusiveMinimum === true) {
    out.exclusiveMinimum = node.minimum;
    delete out.minimum;
  }
  if (node.exclusiveMaximum === true) {
    out.exclusiveMaximum = node.maximum;
    delete out.maximum;
  }
  return out;
}

type Rule = { rule: string; message?: string; fieldPath?: string };

/** Runs every x-kubernetes-validations rule on the value at its node, as the API server does after the schema passes. */
export function celErrors(node: SchemaNode, value: unknown, path: string): string[] {
  if (value === undefined || value === null) return [];
  const errors: string[] = [];
  for (const rule of (node["x-kubernetes-validations"] as Rule[] | undefined) ?? []) {
    if (!evaluate(rule.rule, value)) errors.push(`${path}${rule.fieldPath ?? ""}: ${rule.message}`);
  }
  const props = node.properties as Record<string, SchemaNode> | undefined;
  if (props && isRecord(value)) {
    for (const [name, child] of Object.entries(props)) {
      errors.push(...celErrors(child, value[name], `${path}.${name}`));
    }
  }
  const items = node.items as SchemaNode | undefined;
  if (items && Array.isArray(value)) {
    value.forEach((item, i) => errors.push(...celErrors(items, item, `${path}[${i}]`)));
  }
  const extra = node.additionalProperties as SchemaNode | undefined;
  if (extra && isRecord(value)) {
    for (const [name, item] of Object.entries(value)) {
      errors.push(...celErrors(extra, item, `${path}.${name}`));
    }
  }
  return errors;
}

const COMPARISON = /^self\.(\w+) (<=|<|>=|>|==|!=) self\.(\w+)$/;

/** `self.a <op> self.b` on numbers, nothing else: a new rule form must extend this on purpose. */
export function evaluate(rule: string, self: unknown): boolean {
  const match = COMPARISON.exec(rule);
  if (!match || !isRecord(self)) throw new Error(`the test CEL evaluator cannot run: ${rule}`);
  const [, left, op, right] = match;
  const a = self[left ?? ""];
  const b = self[right ?? ""];
  // CEL fails on a missing field ("no such key"): the API server reports it as an error too.
  if (typeof a !== "number" || typeof b !== "number") return false;
  switch (op) {
    case "<=":
      return a <= b;
    case "<":
      return a < b;
    case ">=":
      return a >= b;
    case ">":
      return a > b;
    case "==":
      return a === b;
    default:
      return a !== b;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
