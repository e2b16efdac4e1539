import { batchInputLineSchema, type BatchError } from "../../api/batches.js";
import { RequestBodySchema } from "../plugins/body-admission.js";
import type { ModelRegistry } from "../registry/registry.js";

/**
 * Validation of a batch input file, line by line, before anything runs:
 * each line must be a request the synchronous route would accept (the same
 * RequestBodySchema, on the API-key route), to the batch's endpoint, with a
 * custom_id of its own and without `stream`. A pure decision per line; the
 * worker reads the file and records the verdicts.
 */
export type LineVerdict =
  { ok: true; customId: string; body: string } | { ok: false; error: BatchError };

export class BatchLineValidator {
  private readonly seen = new Set<string>();
  private readonly schema: RequestBodySchema;

  constructor(
    registry: ModelRegistry,
    private readonly endpoint: string,
  ) {
    this.schema = new RequestBodySchema(registry, "api-key");
  }

  check(line: number, text: string): LineVerdict {
    const fail = (code: string, message: string, param: string | null = null): LineVerdict => ({
      ok: false,
      error: { code, message, param, line },
    });
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return fail("invalid_json_line", `Line ${line} is not a JSON object.`);
    }
    const shape = batchInputLineSchema.safeParse(parsed);
    if (!shape.success) {
      const issue = shape.error.issues[0]!;
      const param =
        issue.code === "unrecognized_keys"
          ? (issue.keys[0] ?? null)
          : issue.path.map(String).join(".") || null;
      return fail(
        "invalid_request",
        `Line ${line}: invalid '${param ?? "line"}': ${issue.message}.`,
        param,
      );
    }
    const { custom_id, url, body } = shape.data;
    if (url !== this.endpoint) {
      return fail(
        "invalid_url",
        `Line ${line}: the url '${url}' is not the batch's endpoint '${this.endpoint}'.`,
        "url",
      );
    }
    if (this.seen.has(custom_id)) {
      return fail(
        "duplicate_custom_id",
        `Line ${line}: the custom_id '${custom_id}' is used by an earlier line.`,
        "custom_id",
      );
    }
    this.seen.add(custom_id);
    if (body.stream === true) {
      return fail("stream_unsupported", `Line ${line}: a batch does not stream.`, "body.stream");
    }
    const verdict = this.schema.validate(body);
    if ("error" in verdict) {
      const param = verdict.error.param === null ? "body" : `body.${verdict.error.param}`;
      return fail(verdict.error.code, `Line ${line}: ${verdict.error.message}`, param);
    }
    return { ok: true, customId: custom_id, body: JSON.stringify(body) };
  }
}
