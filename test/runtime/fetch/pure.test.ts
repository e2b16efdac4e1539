import { describe, expect, it } from "vitest";
import { parseChecksumPairs, parseSha256Sums } from "../../../runtime/fetch/checksums.js";
import { FETCH_ERROR_CODES, FetchError, errorForStatus } from "../../../runtime/fetch/errors.js";
import { fileUrl } from "../../../runtime/fetch/http-source.js";
import { parseContentRange, parseUnsatisfiedRange } from "../../../runtime/fetch/http-client.js";
import { markerMatchesPlan } from "../../../runtime/fetch/marker.js";
import type { FetchMarker } from "../../../runtime/fetch/marker.js";
import { buildPlan } from "../../../runtime/fetch/plan.js";
import { formatBytes, formatFileProgress } from "../../../runtime/fetch/progress.js";
import { backoffDelay } from "../../../runtime/fetch/retry.js";
import { safeRelativePath } from "../../../runtime/fetch/safe-path.js";
import { parseSourceUri, redactUri } from "../../../runtime/fetch/source-uri.js";

const A = "a".repeat(64);
const B = "b".repeat(64);

describe("parseSourceUri", () => {
  it.each([
    ["file:///models/tiny", { scheme: "file", path: "/models/tiny" }],
    ["hf://acme/tiny", { scheme: "hf", repo: "acme/tiny", revision: undefined }],
    ["hf://acme/tiny@v1.0", { scheme: "hf", repo: "acme/tiny", revision: "v1.0" }],
    ["s3://bucket/a/b", { scheme: "s3", bucket: "bucket", prefix: "a/b" }],
    ["s3://bucket", { scheme: "s3", bucket: "bucket", prefix: "" }],
  ])("parses %s", (uri, expected) => {
    expect(parseSourceUri(uri)).toEqual(expected);
  });

  it("makes an http base a folder URL", () => {
    const parsed = parseSourceUri("https://host/models/tiny?sig=x");
    expect(parsed.scheme === "http" && parsed.baseUrl.toString()).toBe(
      "https://host/models/tiny/?sig=x",
    );
  });

  it.each([
    ["models/tiny", "invalid_source_uri"],
    ["hf://only-one-part", "invalid_source_uri"],
    ["hf://a/b/c", "invalid_source_uri"],
    ["hf://../b", "invalid_source_uri"],
    ["s3://UPPER/x", "invalid_source_uri"],
    ["file://relative/path", "invalid_source_uri"],
    ["https://user:pw@host/m/", "invalid_source_uri"],
    ["gs://bucket/m", "unsupported_source_scheme"],
    ["pvc://claim/m", "unsupported_source_scheme"],
  ])("rejects %s with %s", (uri, code) => {
    expect(() => parseSourceUri(uri)).toThrow(expect.objectContaining({ code }));
  });

  it("redacts query strings and user info", () => {
    expect(redactUri("https://h/p/?X-Amz-Signature=abc")).toBe("https://h/p/?<redacted>");
    expect(redactUri("s3://b/p?token=1")).toBe("s3://b/p?<redacted>");
  });
});

describe("safeRelativePath", () => {
  it.each([
    ["config.json", "config.json"],
    ["./onnx//model.onnx", "onnx/model.onnx"],
  ])("normalises %s", (input, out) => expect(safeRelativePath(input)).toBe(out));

  it.each([
    "",
    "/etc/passwd",
    "../x",
    "a/../../x",
    "a/..",
    "C:/x",
    "a\\b",
    "a\0b",
    ".",
    ".modelgate-fetch.json",
    ".modelgate-staging/x",
  ])("refuses %j", (name) =>
    expect(() => safeRelativePath(name)).toThrow(expect.objectContaining({ code: "unsafe_path" })),
  );
});

describe("checksum parsing", () => {
  it("reads sha256sum text and binary-mode lines, skipping blanks and comments", () => {
    expect(
      parseSha256Sums(`# sums\n${A}  config.json\n\n${B.toUpperCase()} *onnx/model.onnx\r\n`),
    ).toEqual({
      "config.json": A,
      "onnx/model.onnx": B,
    });
  });

  it.each([`${A} config.json`, "abc  config.json", `${A}  ../x`])("refuses the line %j", (line) => {
    expect(() => parseSha256Sums(line)).toThrow(FetchError);
  });

  it("refuses one path listed twice with two digests", () => {
    expect(() => parseSha256Sums(`${A}  x\n${B}  x\n`)).toThrow(/twice/);
  });

  it("parses --sha256 pairs", () => {
    expect(parseChecksumPairs([`dir/a=${A}`])).toEqual({ "dir/a": A });
    expect(() => parseChecksumPairs(["x"])).toThrow(
      expect.objectContaining({ code: "invalid_checksums" }),
    );
  });
});

describe("buildPlan", () => {
  const listing = {
    files: [
      { path: "config.json", size: 10 },
      { path: "./onnx/model.onnx", size: 20, sha256: A },
    ],
  };

  it("layers checksums: source digests, then SHA256SUMS, then pinned", () => {
    const plan = buildPlan({
      source: "s",
      revision: undefined,
      listing,
      sums: { "onnx/model.onnx": B },
      pinned: { "config.json": A },
    });
    expect(plan.files).toEqual([
      { path: "config.json", size: 10, sha256: A },
      { path: "onnx/model.onnx", size: 20, sha256: B },
    ]);
  });

  it("refuses a checksum for a file the source does not list", () => {
    expect(() =>
      buildPlan({ source: "s", revision: undefined, listing, sums: {}, pinned: { "x.bin": A } }),
    ).toThrow(expect.objectContaining({ code: "missing_file" }));
  });

  it("refuses a name that is both a file and a folder", () => {
    const clash = { files: [{ path: "a" }, { path: "a/b" }] };
    expect(() =>
      buildPlan({ source: "s", revision: undefined, listing: clash, sums: {}, pinned: {} }),
    ).toThrow(expect.objectContaining({ code: "unsafe_path" }));
  });

  it("refuses an empty listing", () => {
    expect(() =>
      buildPlan({ source: "s", revision: undefined, listing: { files: [] }, sums: {}, pinned: {} }),
    ).toThrow(expect.objectContaining({ code: "source_not_found" }));
  });
});

describe("markerMatchesPlan", () => {
  const marker: FetchMarker = {
    version: 1,
    source: "hf://a/b",
    revision: "r1",
    files: [{ path: "x", size: 3, sha256: A }],
    fetchedAt: "2024-01-01T00:00:00.000Z",
  };
  const plan = { source: "hf://a/b", revision: "r1", files: [{ path: "x", size: 3, sha256: A }] };

  it("matches the same source, revision and files", () =>
    expect(markerMatchesPlan(marker, plan)).toBe(true));
  it("matches when the plan does not know size or digest", () =>
    expect(
      markerMatchesPlan(marker, {
        ...plan,
        files: [{ path: "x", size: undefined, sha256: undefined }],
      }),
    ).toBe(true));
  it.each([
    ["revision", { ...plan, revision: "r2" }],
    ["source", { ...plan, source: "hf://a/c" }],
    ["digest", { ...plan, files: [{ path: "x", size: 3, sha256: B }] }],
    ["size", { ...plan, files: [{ path: "x", size: 4, sha256: A }] }],
    ["file set", { ...plan, files: [...plan.files, { path: "y", size: 1, sha256: undefined }] }],
  ])("does not match another %s", (_what, other) =>
    expect(markerMatchesPlan(marker, other)).toBe(false),
  );
});

describe("small pure helpers", () => {
  it("parses Content-Range", () => {
    expect(parseContentRange("bytes 100-199/200")).toEqual({ start: 100, end: 199, total: 200 });
    expect(parseContentRange("bytes 0-9/*")).toEqual({ start: 0, end: 9, total: undefined });
    expect(parseContentRange("items 1-2/3")).toBeUndefined();
    expect(parseUnsatisfiedRange("bytes */300")).toBe(300);
  });

  it("grows the backoff exponentially up to the cap", () => {
    const policy = { attempts: 5, baseDelayMs: 100, maxDelayMs: 300 };
    expect([1, 2, 3, 4].map((n) => backoffDelay(policy, n, 1))).toEqual([100, 200, 300, 300]);
    expect(backoffDelay(policy, 2, 0)).toBe(100);
  });

  it("encodes file names into URLs and keeps the base query", () => {
    const base = new URL("https://h/m/?sig=1");
    expect(fileUrl(base, "onnx/a b#c.onnx").toString()).toBe(
      "https://h/m/onnx/a%20b%23c.onnx?sig=1",
    );
  });

  it("formats progress lines", () => {
    expect(formatFileProgress("m.onnx", 512 * 1024, 2 * 1024 * 1024)).toBe(
      "m.onnx 512.0 KiB/2.0 MiB (25%)",
    );
    expect(formatBytes(10)).toBe("10 B");
  });

  it("maps statuses to codes and retryability", () => {
    expect(errorForStatus(404, "GET x")).toMatchObject({
      code: "source_not_found",
      retryable: false,
    });
    expect(errorForStatus(403, "GET x")).toMatchObject({ code: "access_denied", retryable: false });
    expect(errorForStatus(400, "GET x")).toMatchObject({
      code: "download_failed",
      retryable: false,
    });
    expect(errorForStatus(503, "GET x")).toMatchObject({
      code: "download_failed",
      retryable: true,
    });
    expect(errorForStatus(429, "GET x")).toMatchObject({ retryable: true });
  });

  it("keeps error codes snake_case and unique", () => {
    expect(new Set(FETCH_ERROR_CODES).size).toBe(FETCH_ERROR_CODES.length);
    for (const code of FETCH_ERROR_CODES) expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
  });
});
