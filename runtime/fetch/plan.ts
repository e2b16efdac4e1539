import type { Checksums } from "./checksums.js";
import { FetchError } from "./errors.js";
import { safeRelativePath } from "./safe-path.js";
import type { SourceListing } from "./source.js";

export interface PlannedFile {
  path: string;
  /** Expected size, when the source listed one. */
  size: number | undefined;
  /** Expected sha256, when any checksum source knows it. */
  sha256: string | undefined;
}

export interface FetchPlan {
  /** Printable source, as recorded in the marker. */
  source: string;
  revision: string | undefined;
  files: PlannedFile[];
}

/**
 * Decides what to download and what to expect of each file. Pure.
 *
 * Checksums are layered, strongest last: the source's own digests (the hub's
 * LFS sha256), then SHA256SUMS, then what the caller pinned. A pinned or
 * SHA256SUMS digest for a file the source does not have is an error: the
 * source is not the model the caller expects.
 */
export function buildPlan(input: {
  source: string;
  revision: string | undefined;
  listing: SourceListing;
  sums: Checksums;
  pinned: Checksums;
}): FetchPlan {
  const byPath = new Map<string, PlannedFile>();
  for (const file of input.listing.files) {
    const path = safeRelativePath(file.path);
    const previous = byPath.get(path);
    byPath.set(path, {
      path,
      size: file.size ?? previous?.size,
      sha256: file.sha256?.toLowerCase() ?? previous?.sha256,
    });
  }
  if (byPath.size === 0) {
    throw new FetchError("source_not_found", `${input.source} lists no files`);
  }
  for (const [origin, sums] of [
    ["SHA256SUMS", input.sums],
    ["pinned checksums", input.pinned],
  ] as const) {
    for (const [path, sha256] of Object.entries(sums)) {
      const planned = byPath.get(path);
      if (!planned) {
        throw new FetchError(
          "missing_file",
          `${origin} names ${path}, which ${input.source} does not have`,
        );
      }
      planned.sha256 = sha256;
    }
  }
  const files = [...byPath.values()].sort((a, b) =>
    a.path < b.path ? -1 : a.path > b.path ? 1 : 0,
  );
  assertNoFileFolderClash(files);
  return { source: input.source, revision: input.revision, files };
}

/** `a` and `a/b` cannot both exist on disk; say so before downloading either. */
function assertNoFileFolderClash(files: readonly PlannedFile[]): void {
  const names = new Set(files.map((f) => f.path));
  for (const file of files) {
    const parts = file.path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const folder = parts.slice(0, i).join("/");
      if (names.has(folder)) {
        throw new FetchError("unsafe_path", `${folder} is listed both as a file and as a folder`);
      }
    }
  }
}
