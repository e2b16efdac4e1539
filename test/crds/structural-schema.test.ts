import { describe, expect, it } from "vitest";
import { z } from "zod";
import { StructuralSchemaError, toStructuralSchema } from "../../crds/structural-schema.js";

/**
 * The zod → structural conversion on shapes the InferenceModel schema does
 * not use yet, so that the next field added is either converted the way the
 * API server wants or refused at generation time with its path.
 */
const props = (schema: z.ZodType) =>
  toStructuralSchema(schema).properties as Record<string, Record<string, unknown>>;

describe("toStructuralSchema", () => {
  it("writes .nullable() as nullable: true on the typed node, not as anyOf with null", () => {
    expect(props(z.object({ a: z.string().nullable() })).a).toEqual({
      type: "string",
      nullable: true,
    });
    expect(
      props(z.object({ o: z.object({ n: z.number() }).nullable().optional() })).o,
    ).toMatchObject({
      type: "object",
      nullable: true,
    });
  });

  it("turns a loose object into x-kubernetes-preserve-unknown-fields instead of additionalProperties", () => {
    const loose = props(z.object({ l: z.looseObject({ n: z.string() }) })).l;
    expect(loose?.additionalProperties).toBeUndefined();
    expect(loose?.["x-kubernetes-preserve-unknown-fields"]).toBe(true);
  });

  it("drops additionalProperties: false next to properties (pruning already closes the object)", () => {
    const strict = toStructuralSchema(z.strictObject({ n: z.string() }));
    expect(strict).toEqual({
      type: "object",
      properties: { n: { type: "string" } },
      required: ["n"],
    });
  });

  it("keeps a record as additionalProperties with a typed value", () => {
    expect(props(z.object({ m: z.record(z.string(), z.number().int()) })).m).toEqual({
      type: "object",
      additionalProperties: { type: "integer" },
    });
  });

  it("marks z.unknown() as keeping unknown fields, the only untyped node allowed", () => {
    expect(props(z.object({ u: z.unknown() })).u).toEqual({
      "x-kubernetes-preserve-unknown-fields": true,
    });
  });

  it("drops a format Kubernetes does not know when a pattern says the same", () => {
    expect(props(z.object({ t: z.string().includes("{}") })).t).toEqual({
      type: "string",
      pattern: "\\{\\}",
    });
  });

  it("keeps defaults and leaves fields with a default out of required", () => {
    const schema = toStructuralSchema(z.object({ n: z.number().int().default(3), m: z.string() }));
    expect(schema.required).toEqual(["m"]);
    expect((schema.properties as Record<string, unknown>).n).toEqual({
      type: "integer",
      default: 3,
    });
  });

  it.each([
    ["a union", z.object({ u: z.union([z.string(), z.number()]) }), "u: anyOf"],
    ["a lookahead pattern", z.object({ p: z.string().regex(/^(?!x)/) }), "p: pattern"],
    [
      "a refine without its CEL twin",
      z.object({ r: z.object({ a: z.number() }).refine(() => true) }),
      "r: the zod schema has a refine",
    ],
    ["a tuple", z.object({ t: z.tuple([z.string(), z.number()]) }), "t[*]: anyOf"],
  ])("refuses %s, naming the path", (_name, schema, message) => {
    expect(() => toStructuralSchema(schema)).toThrow(StructuralSchemaError);
    expect(() => toStructuralSchema(schema)).toThrow(message);
  });

  it("accepts a refine whose CEL twin is given at its path", () => {
    const schema = z.object({
      r: z.object({ a: z.number(), b: z.number() }).refine((r) => r.a < r.b),
    });
    const rule = { rule: "self.a < self.b", message: "a must be below b" };
    const out = toStructuralSchema(schema, { r: { "x-kubernetes-validations": [rule] } });
    expect(
      (out.properties as Record<string, Record<string, unknown>>).r?.["x-kubernetes-validations"],
    ).toEqual([rule]);
  });

  it("refuses an extension for a path the schema does not have (a renamed field)", () => {
    expect(() =>
      toStructuralSchema(z.object({ a: z.string() }), {
        b: { "x-kubernetes-list-type": "atomic" },
      }),
    ).toThrow("b: extension for a path the schema lacks");
  });
});
