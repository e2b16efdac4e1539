import { createFileSource } from "./file-source.js";
import { createHfSource } from "./hf-source.js";
import { createHttpSource } from "./http-source.js";
import { createS3Source } from "./s3-source.js";
import type { ModelSource, SourceContext } from "./source.js";
import type { SourceUri } from "./source-uri.js";

/** The one place a scheme is mapped to its module. */
export function createSource(uri: SourceUri, ctx: SourceContext): ModelSource {
  switch (uri.scheme) {
    case "file":
      return createFileSource(uri.path);
    case "http":
      return createHttpSource(uri.baseUrl, ctx);
    case "hf":
      return createHfSource(uri.repo, uri.revision, ctx);
    case "s3":
      return createS3Source(uri.bucket, uri.prefix, ctx);
  }
}
