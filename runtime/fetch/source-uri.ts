import { fileURLToPath } from "node:url";
import { FetchError } from "./errors.js";

/** A model source URI, parsed. Pure data: no I/O happened to build it. */
export type SourceUri =
  | { scheme: "file"; path: string }
  | { scheme: "http"; baseUrl: URL }
  | { scheme: "hf"; repo: string; revision: string | undefined }
  | { scheme: "s3"; bucket: string; prefix: string };

export const SUPPORTED_SCHEMES = ["file", "http", "https", "hf", "s3"] as const;

const HF_REPO_PART = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function parseSourceUri(raw: string): SourceUri {
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(raw);
  if (!match?.[1]) {
    throw new FetchError(
      "invalid_source_uri",
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
      throw new FetchError(
        "unsupported_source_scheme",
        `source scheme "${scheme}://" is not supported by runtime fetch (supported: ${SUPPORTED_SCHEMES.join(", ")})`,
      );
  }
}

function parseFileUri(raw: string): SourceUri {
  let path: string;
  try {
    path = fileURLToPath(raw);
  } catch (cause) {
    throw new FetchError(
      "invalid_source_uri",
      `source "${raw}" is not a valid file URI (expected file:///absolute/path)`,
      { cause },
    );
  }
  return { scheme: "file", path };
}

function parseHttpUri(raw: string): SourceUri {
  let url: URL;
  try {
    url = new URL(raw);
  } catch (cause) {
    throw new FetchError("invalid_source_uri", `source "${redactUri(raw)}" is not a valid URL`, {
      cause,
    });
  }
  if (url.username || url.password) {
    throw new FetchError(
      "invalid_source_uri",
      `source "${redactUri(raw)}" carries credentials in the URL; they are not supported`,
    );
  }
  // The base is a folder: files resolve under it, never beside it.
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  url.hash = "";
  return { scheme: "http", baseUrl: url };
}

function parseHfUri(rest: string): SourceUri {
  const at = rest.indexOf("@");
  const repo = (at === -1 ? rest : rest.slice(0, at)).replace(/\/+$/, "");
  const revision = at === -1 ? undefined : rest.slice(at + 1);
  const parts = repo.split("/");
  if (parts.length !== 2 || !parts.every((p) => HF_REPO_PART.test(p) && !p.includes(".."))) {
    throw new FetchError(
      "invalid_source_uri",
      `source "hf://${rest}" is not a Hugging Face repository (expected hf://org/name[@revision])`,
    );
  }
  if (revision !== undefined && (revision === "" || /[\s?#]/.test(revision))) {
    throw new FetchError("invalid_source_uri", `source "hf://${rest}" has an invalid revision`);
  }
  return { scheme: "hf", repo, revision };
}

function parseS3Uri(rest: string): SourceUri {
  const slash = rest.indexOf("/");
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  const prefix = slash === -1 ? "" : rest.slice(slash + 1);
  // Bucket naming rules, loosely: enough to catch typos and stray characters.
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new FetchError(
      "invalid_source_uri",
      `source "s3://${rest}" has an invalid bucket name "${bucket}" (expected s3://bucket/prefix)`,
    );
  }
  return { scheme: "s3", bucket, prefix };
}

/**
 * The form of a source that is safe to print and to store in the marker:
 * no user info, no query string (pre-signed URLs and SAS tokens live there).
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

/** The canonical, printable identity of a source, the thing the marker records. */
export function describeSource(uri: SourceUri): string {
  switch (uri.scheme) {
    case "file":
      return `file://${uri.path}`;
    case "http":
      return redactUri(uri.baseUrl.toString());
    case "hf":
      return `hf://${uri.repo}`;
    case "s3":
      return `s3://${uri.bucket}/${uri.prefix}`;
  }
}
