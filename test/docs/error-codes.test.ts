import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { BatchErrors } from "../../gateway/batch/batch-errors.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { GatewayErrors } from "../../gateway/errors.js";
import { PAY_ERROR_CODES } from "../../gateway/pay/pay-errors.js";
import { RuntimeErrors } from "../../runtime/errors.js";
import { FETCH_ERROR_CODES } from "../../runtime/fetch/errors.js";

const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");
const documented = new Set([...doc.matchAll(/^\| `([a-z_]+)` +\|/gm)].map((m) => m[1]));

const codes = [
  ...new Set([
    ...Object.values(HttpErrors).map((e) => e.code),
    ...Object.values(GatewayErrors).map((e) => e.code),
    ...Object.values(BatchErrors).map((e) => e.code),
    ...PAY_ERROR_CODES,
    ...Object.values(RuntimeErrors).map((e) => e.code),
    ...FETCH_ERROR_CODES,
  ]),
];

describe("docs/errors.md", () => {
  it("lists every error code the source defines", () => {
    expect(codes.filter((code) => !documented.has(code))).toEqual([]);
  });

  it("lists no code the source does not define", () => {
    expect([...documented].filter((code) => !codes.includes(code!))).toEqual([]);
  });

  it("pins the set: a change to it is a change to this list", () => {
    expect([...codes].sort()).toEqual(
      [
        "invalid_json",
        "not_found",
        "method_not_allowed",
        "request_receive_timeout",
        "unsupported_content_type",
        "unsupported_content_encoding",
        "request_too_large",
        "headers_too_large",
        "invalid_request",
        "model_not_found",
        "response_not_found",
        "response_not_cancellable",
        "conversation_unsupported",
        "context_length_exceeded",
        "rate_limit_exceeded",
        "model_not_ready",
        "client_closed_request",
        "invalid_api_key",
        "project_forbidden",
        "request_timeout",
        "upstream_unavailable",
        "upstream_error",
        "model_unavailable",
        "invalid_query",
        "admin_key_required",
        "usage_unavailable",
        "invalid_pay_signature",
        "pay_signature_expired",
        "payment_required",
        "model_load_failed",
        "input_item_not_found",
        "file_not_found",
        "batch_not_found",
        "file_too_large",
        "too_many_lines",
        "batch_not_cancellable",
        "store_unavailable",
        ...FETCH_ERROR_CODES,
      ].sort(),
    );
  });
});
