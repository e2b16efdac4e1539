import { describe, expect, it } from "vitest";
import { parseSourceUri, redactUri, SUPPORTED_SCHEMES } from "../../crds/source-uri.js";

/**
 * The spec.source.uri grammar both the operator and `runtime fetch` use: a
 * refusal is an answer with a code and a message, never a throw.
 */
describe("parseSourceUri (crds)", () => {
  it.each([
    ["file:///models/tiny", { scheme: "file", path: "/models/tiny" }],
    ["hf://acme/tiny", { scheme: "hf", repo: "acme/tiny", revision: undefined }],
    ["HF://acme/tiny@v1.0", { scheme: "hf", repo: "acme/tiny", revision: "v1.0" }],
    ["s3://bucket/a/b", { scheme: "s3", bucket: "bucket", prefix: "a/b" }],
  ])("parses %s", (raw, uri) => {
    expect(parseSourceUri(raw)).toEqual({ ok: true, uri });
  });

  it("makes an http(s) base a folder URL and keeps its query for the download", () => {
    const parsed = parseSourceUri("https://host/models/tiny?sig=x#frag");
    expect(parsed.ok && parsed.uri.scheme === "http" && parsed.uri.baseUrl.toString()).toBe(
      "https://host/models/tiny/?sig=x",
    );
  });

  it.each([
    ["models/tiny", "invalid_source_uri", /is not a URI/],
    ["hf://only-one-part", "invalid_source_uri", /not a Hugging Face repository/],
    ["hf://a/b@", "invalid_source_uri", /invalid revision/],
    ["s3://UPPER/x", "invalid_source_uri", /invalid bucket name "UPPER"/],
    ["file://host/relative", "invalid_source_uri", /not a valid file URI/],
    ["https://user:pw@host/m/", "invalid_source_uri", /carries credentials/],
    ["gs://bucket/m", "unsupported_source_scheme", /"gs:\/\/" is not supported \(supported: /],
  ])("refuses %s with %s", (raw, code, message) => {
    const parsed = parseSourceUri(raw);
    expect(parsed).toMatchObject({ ok: false, code });
    expect(!parsed.ok && parsed.message).toMatch(message);
  });

  it("never puts credentials or a query string in a refusal", () => {
    for (const raw of ["https://user:hunter2@host/m/?sig=s3cr3t", "not a uri?token=s3cr3t"]) {
      const parsed = parseSourceUri(raw);
      expect(parsed.ok).toBe(false);
      expect(JSON.stringify(parsed)).not.toMatch(/hunter2|s3cr3t/);
    }
  });

  it("lists the schemes it reads", () => {
    expect(SUPPORTED_SCHEMES).toEqual(["file", "http", "https", "hf", "s3"]);
  });

  it("redacts user info and query strings", () => {
    expect(redactUri("https://u:p@h/p/?X-Amz-Signature=abc")).toBe("https://h/p/?<redacted>");
    expect(redactUri("s3://b/p?token=1")).toBe("s3://b/p?<redacted>");
    expect(redactUri("hf://o/m")).toBe("hf://o/m");
  });
});
