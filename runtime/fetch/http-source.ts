import { Readable } from "node:stream";
import { SHA256SUMS_FILE, parseSha256Sums } from "./checksums.js";
import { FetchError } from "./errors.js";
import { getRange, getText } from "./http-client.js";
import { safeRelativePath } from "./safe-path.js";
import { redactUri } from "./source-uri.js";
import type { ModelSource, OpenedFile, SourceContext, SourceListing } from "./source.js";

/**
 * `https://host/path/` (and `http://` for loopback tests). A plain web server
 * cannot list a folder, so the file list comes from `<base>/SHA256SUMS` or,
 * when that is absent, from the `files` option.
 */
export function createHttpSource(baseUrl: URL, ctx: SourceContext): ModelSource {
  // SHA256SUMS is read once for the listing and served from memory when the
  // copy asks for it, so the file copied is the file the checksums came from.
  let sumsText: string | undefined;

  return {
    description: redactUri(baseUrl.toString()),
    async list(signal): Promise<SourceListing> {
      sumsText = await readSumsFile(baseUrl, ctx, signal);
      if (sumsText !== undefined) {
        const checksums = parseSha256Sums(
          sumsText,
          `${redactUri(baseUrl.toString())} ${SHA256SUMS_FILE}`,
        );
        const files = Object.keys(checksums).filter((p) => p !== SHA256SUMS_FILE);
        const extra = (ctx.files ?? []).filter((p) => !(p in checksums));
        return {
          files: [...files, ...extra, SHA256SUMS_FILE].map((path) => ({ path })),
          checksums,
        };
      }
      if (!ctx.files || ctx.files.length === 0) {
        throw new FetchError(
          "file_list_required",
          `${redactUri(baseUrl.toString())} has no ${SHA256SUMS_FILE}; pass the list of files (option "files" / --file)`,
        );
      }
      return { files: ctx.files.map((path) => ({ path })) };
    },
    open(path, start, signal): Promise<OpenedFile> {
      if (path === SHA256SUMS_FILE && sumsText !== undefined) {
        const bytes = Buffer.from(sumsText, "utf8");
        return Promise.resolve({
          body: Readable.from([bytes.subarray(start)]),
          offset: start,
          size: bytes.length,
        });
      }
      return getRange(fileUrl(baseUrl, path), start, { dispatcher: ctx.dispatcher, signal });
    },
  };
}

async function readSumsFile(
  baseUrl: URL,
  ctx: SourceContext,
  signal: AbortSignal | undefined,
): Promise<string | undefined> {
  try {
    return await getText(fileUrl(baseUrl, SHA256SUMS_FILE), { dispatcher: ctx.dispatcher, signal });
  } catch (err) {
    if (err instanceof FetchError && err.code === "source_not_found") return undefined;
    throw err;
  }
}

/**
 * The URL of one file under the base. Each segment is percent-encoded, so a
 * name cannot smuggle `?`, `#` or `..` into the request; a query string on the
 * base (a SAS token, say) is carried over to every file.
 */
export function fileUrl(baseUrl: URL, path: string): URL {
  const encoded = safeRelativePath(path).split("/").map(encodeURIComponent).join("/");
  const url = new URL(encoded, baseUrl);
  url.search = baseUrl.search;
  return url;
}
