import { fileURLToPath } from "node:url";

/**
 * The grammar of `spec.source.uri`, part of the InferenceModel contract: the
 * operator judges a spec with it (an unknown scheme is Degraded/InvalidSpec
 * before any pod starts) and `modelgate runtime fetch` reads its source with
 * it, so the two accept exactly the same URIs.
 *
 * Pure and without I/O. A URI that does not parse is an answer, not a throw:
 * each component turns it into its own error (the fetch's coded FetchError,
 * the operator's condition message).
 */

/** A model source URI, parsed. Pure data: no I/O happened to build it. */
export type SourceUri =
  | { scheme: "file"; path: string }
  | { scheme: "http"; baseUrl: URL }
  | { scheme: "hf"; repo: string; revision: string | undefined }
  | { scheme: "s3"; bucket: string; prefix: string };

export const SUPPORTED_SCHEMES = ["file", "http", "https", "hf", "s3"] as const;

/** The two ways a URI can be refused; both are codes of the fetch component too (docs/errors.md). */
export type SourceUriProblem = "invalid_source_uri" | "unsupported_source_scheme";

export type ParsedSourceUri =
  { ok: true; uri: SourceUri } | { ok: false; code: SourceUriProblem; message: string };

const HF_REPO_PART = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function parseSourceUri(raw: string): ParsedSourceUri {
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(raw);
  if (!match?.[1]) {
    return invalid(
      `source "${redactUri(raw)}" is not a URI (expected scheme://…, e.g. file:///models/x or hf://org/name)`,
    );
  }
  const scheme = match[1].toLowerCase();
  switch (scheme) {
    case "file":
      return parseFileUri(raw);
    case "http":
    case "https":
      return parseHttpUri(raw);
    case "hf":
      return parseHfUri(raw.slice("hf://".length));
    case "s3":
      return parseS3Uri(raw.slice("s3://".length));
    default:
      return {
        ok: false,
        code: "unsupported_source_scheme",
        message: `source scheme "${scheme}://" is not supported (supported: ${SUPPORTED_SCHEMES.join(", ")})`,
      };
  }
}

function invalid(message: string): ParsedSourceUri {
  return { ok: false, code: "invalid_source_uri", message };
}

function parseFileUri(raw: string): ParsedSourceUri {
  try {
    return { ok: true, uri: { scheme: "file", path: fileURLToPath(raw) } };
  } catch (error) {
    const why = error instanceof Error ? `: ${error.message}` : "";
    return invalid(
      `source "${raw}" is not a valid file URI (expected file:///absolute/path)${why}`,
    );
  }
}

function parseHttpUri(raw: string): ParsedSourceUri {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return invalid(`source "${redactUri(raw)}" is not a valid URL`);
  }
  if (url.username || url.password) {
    return invalid(
      `source "${redactUri(raw)}" carries credentials in the URL; they are not supported`,
    );
  }
  // The base is a folder: files resolve under it, never beside it.
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  url.hash = "";
  return { ok: true, uri: { scheme: "http", baseUrl: url } };
}

function parseHfUri(rest: string): ParsedSourceUri {
  const at = rest.indexOf("@");
  const repo = (at === -1 ? rest : rest.slice(0, at)).replace(/\/+$/, "");
  const revision = at === -1 ? undefined : rest.slice(at + 1);
  const parts = repo.split("/");
  if (parts.length !== 2 || !parts.every((p) => HF_REPO_PART.test(p) && !p.includes(".."))) {
    return invalid(
      `source "hf://${rest}" is not a Hugging Face repository (expected hf://org/name[@revision])`,
    );
  }
  if (revision !== undefined && (revision === "" || /[\s?#]/.test(revision))) {
    return invalid(`source "hf://${rest}" has an invalid revision`);
  }
  return { ok: true, uri: { scheme: "hf", repo, revision } };
}

function parseS3Uri(rest: string): ParsedSourceUri {
  const slash = rest.indexOf("/");
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  const prefix = slash === -1 ? "" : rest.slice(slash + 1);
  // Bucket naming rules, loosely: enough to catch typos and stray characters.
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    return invalid(
      `source "s3://${rest}" has an invalid bucket name "${bucket}" (expected s3://bucket/prefix)`,
    );
  }
  return { ok: true, uri: { scheme: "s3", bucket, prefix } };
}

/**
 * The form of a source that is safe to print, in a log line, a condition
 * message or the fetch's marker: no user info, no query string (pre-signed
 * URLs and SAS tokens live there).
 */
export function redactUri(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.protocol === "http:" || url.protocol === "https:") {
      url.username = "";
      url.password = "";
      const hadQuery = url.search !== "";
      url.search = "";
      url.hash = "";
      return hadQuery ? `${url.toString()}?<redacted>` : url.toString();
    }
  } catch {
    // Not a URL: fall through to the plain string without a query.
  }
  const q = raw.search(/[?#]/);
  return q === -1 ? raw : `${raw.slice(0, q)}?<redacted>`;
}
