import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { entityExtractionRequestSchema } from "../../../api/responses-request.js";
import { validateRequest } from "../../../api/validation.js";

/**
 * The OpenAPI document states the entity-extraction options as JSON Schema;
 * the gateway judges them with parseExtractionOptions. Both must give the
 * same verdict, so a client generating requests from the document is never
 * refused for a shape the document allows (the JSON inside `schema` aside:
 * no JSON Schema keyword can state it, and its description says it).
 */
const document = z.toJSONSchema(entityExtractionRequestSchema, {
  target: "draft-2020-12",
  io: "input",
  unrepresentable: "any",
});
const ajv = new Ajv2020({ strict: false, unicodeRegExp: true });
const validate = ajv.compile(document);

const CASES: Array<Record<string, string>> = [
  {},
  { threshold: "0" },
  { threshold: "0.35" },
  { threshold: ".5" },
  { threshold: "1.0" },
  { threshold: "1.01" },
  { threshold: "2" },
  { threshold: "1e-1" },
  { mask: "true" },
  { mask: "no" },
  { mask: "true", replacement_char: "#" },
  { mask: "false", replacement_char: "#" },
  { replacement_char: "#" },
  { usecase: "pii", replacement_char: "#" },
  { usecase: "contact", replacement_char: "#" },
  { usecase: "contact", mask: "true", replacement_char: "[label]" },
  { mask: "true", replacement_char: "ab" },
  { mask: "true", replacement_char: "😀" },
  { labels: "EMAIL, PHONE" },
  { labels: "[EMAIL]" },
  { labels: "" },
  { schema: '{"a": "EMAIL"}' },
  { schema: '{"a": "EMAIL"}', labels: "EMAIL" },
  { schema: '{"a": "EMAIL"}', usecase: "pii" },
  { schema: '{"a": "EMAIL"}', mask: "true" },
  { schema: '{"a": "EMAIL"}', mask: "false" },
  { usecase: "pii" },
  { usecase: "medical" },
];

describe("entity-extraction options: the document and the gateway agree", () => {
  it.each(CASES)("gives one verdict on %j", (metadata) => {
    const body = { model: "m", input: "John", metadata };
    const byDocument = validate(body);
    const byGateway = validateRequest(body, "entity-extraction").ok;
    expect(byDocument, JSON.stringify(validate.errors)).toBe(byGateway);
  });
});
