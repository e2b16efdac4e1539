import { describe, expect, it } from "vitest";
import { parseExtractionOptions } from "../../../api/entity-options.js";
import { validateRequest } from "../../../api/validation.js";

const body = (metadata: Record<string, string>) => ({ model: "m", input: "John", metadata });

describe("entity-extraction options in metadata", () => {
  it("has the documented defaults", () => {
    expect(parseExtractionOptions(undefined)).toEqual({
      ok: true,
      options: {
        usecase: null,
        labels: null,
        threshold: 0.5,
        mask: false,
        replacement: { kind: "char", char: "*" },
        schema: null,
      },
    });
  });

  it("reads each option", () => {
    const parsed = parseExtractionOptions({
      labels: "[EMAIL, 'phone number', EMAIL]",
      threshold: "0.75",
      mask: "true",
      replacement_char: "█",
    });
    expect(parsed).toEqual({
      ok: true,
      options: {
        usecase: null,
        labels: ["EMAIL", "phone number"],
        threshold: 0.75,
        mask: true,
        replacement: { kind: "char", char: "█" },
        schema: null,
      },
    });
  });

  it("lets a usecase imply its settings, and the request override them", () => {
    const pii = parseExtractionOptions({ usecase: "pii" });
    expect(pii.ok && pii.options.mask).toBe(true);
    expect(pii.ok && pii.options.replacement).toEqual({ kind: "label" });
    const unmasked = parseExtractionOptions({ usecase: "pii", mask: "false" });
    expect(unmasked.ok && unmasked.options.mask).toBe(false);
  });

  it("reads a schema's single and list fields", () => {
    const parsed = parseExtractionOptions({
      schema: '{"email": "EMAIL", "names": ["GIVEN_NAME"]}',
    });
    expect(parsed.ok && parsed.options.schema).toEqual({
      email: { type: "EMAIL", many: false },
      names: { type: "GIVEN_NAME", many: true },
    });
  });

  it.each([
    [{ threshold: "-0.1" }, "metadata.threshold"],
    [{ threshold: "1.01" }, "metadata.threshold"],
    [{ threshold: "0x1" }, "metadata.threshold"],
    [{ mask: "TRUE" }, "metadata.mask"],
    [{ mask: "true", replacement_char: " " }, "metadata.replacement_char"],
    [{ mask: "true", replacement_char: "**" }, "metadata.replacement_char"],
    [{ labels: Array.from({ length: 26 }, (_, i) => `L${i}`).join(",") }, "metadata.labels"],
    [{ labels: "[]" }, "metadata.labels"],
    [{ usecase: "PII" }, "metadata.usecase"],
    [{ schema: "{" }, "metadata.schema"],
    [{ schema: "{}" }, "metadata.schema"],
    [{ schema: '{"a": ["EMAIL", "PHONE"]}' }, "metadata.schema"],
    [{ schema: '{"a": "EMAIL"}', mask: "true" }, "metadata.mask"],
    [{ schema: '{"a": "EMAIL"}', usecase: "pii" }, "metadata.schema"],
  ])("the request schema refuses %j naming %s", (metadata, param) => {
    const validation = validateRequest(body(metadata), "entity-extraction");
    expect(validation.ok).toBe(false);
    if (!validation.ok) {
      expect(validation.problem.param).toBe(param);
      expect(validation.problem.message).toContain(`'${param}'`);
    }
  });

  it("takes a schema longer than other metadata values may be", () => {
    const fields = Object.fromEntries(
      Array.from({ length: 20 }, (_, i) => [`field_${i}_name_${"x".repeat(20)}`, "EMAIL"]),
    );
    const schema = JSON.stringify(fields);
    expect(schema.length).toBeGreaterThan(512);
    expect(validateRequest(body({ schema }), "entity-extraction").ok).toBe(true);
  });

  it("leaves the keys as plain metadata for a generation model", () => {
    expect(validateRequest(body({ threshold: "high", mask: "maybe" }), "text-generation").ok).toBe(
      true,
    );
  });
});
