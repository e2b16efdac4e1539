import {
  parseSourceUri as parseSourceUriGrammar,
  redactUri,
  type SourceUri,
} from "../../crds/source-uri.js";
import { FetchError } from "./errors.js";

/**
 * The source URI grammar is the InferenceModel contract's (crds/source-uri.ts):
 * the operator judges a spec with the same parser. Here its refusals become
 * the fetch component's coded errors.
 */
export { redactUri, type SourceUri };

export function parseSourceUri(raw: string): SourceUri {
  const parsed = parseSourceUriGrammar(raw);
  if (!parsed.ok) throw new FetchError(parsed.code, parsed.message);
  return parsed.uri;
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
