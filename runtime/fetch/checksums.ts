import { FetchError } from "./errors.js";
import { safeRelativePath } from "./safe-path.js";

/** relative path → lowercase sha256 hex */
export type Checksums = Record<string, string>;

export const SHA256SUMS_FILE = "SHA256SUMS";

const SHA256_HEX = /^[0-9a-fA-F]{64}$/;

/**
 * Parses the output of `sha256sum` (`<hex>  <path>`, or `<hex> *<path>` in
 * binary mode). Blank lines and `#` comments are skipped; anything else that
 * does not parse is an error, because a silently skipped line would be a file
 * left unverified.
 */
export function parseSha256Sums(text: string, origin = SHA256SUMS_FILE): Checksums {
  const sums: Checksums = {};
  const lines = text.split(/\r?\n/);
  lines.forEach((line, index) => {
    if (line.trim() === "" || line.startsWith("#")) return;
    const match = /^([0-9a-fA-F]{64}) [ *](.+)$/.exec(line);
    if (!match?.[1] || !match[2]) {
      throw new FetchError(
        "invalid_checksums",
        `${origin} line ${index + 1} is not "<sha256 hex>  <path>"`,
      );
    }
    const path = safeRelativePath(match[2]);
    addChecksum(sums, path, match[1], origin);
  });
  return sums;
}

/** Parses repeated `path=hex` arguments (the CLI's `--sha256`). */
export function parseChecksumPairs(pairs: readonly string[]): Checksums {
  const sums: Checksums = {};
  for (const pair of pairs) {
    const eq = pair.lastIndexOf("=");
    if (eq <= 0) {
      throw new FetchError("invalid_checksums", `--sha256 "${pair}" is not "path=<sha256 hex>"`);
    }
    addChecksum(sums, safeRelativePath(pair.slice(0, eq)), pair.slice(eq + 1), "--sha256");
  }
  return sums;
}

/** Validates and normalises a checksum map given as data (options, CRD). */
export function normaliseChecksums(
  input: Readonly<Record<string, string>>,
  origin: string,
): Checksums {
  const sums: Checksums = {};
  for (const [path, hex] of Object.entries(input)) {
    addChecksum(sums, safeRelativePath(path), hex, origin);
  }
  return sums;
}

/**
 * Merges checksum sources, later ones winning. The caller passes the
 * explicitly pinned values last: a digest the operator wrote down is the
 * trust anchor, a SHA256SUMS served by the same host is not.
 */
export function mergeChecksums(...sources: readonly Checksums[]): Checksums {
  return Object.assign({}, ...sources) as Checksums;
}

function addChecksum(sums: Checksums, path: string, hex: string, origin: string): void {
  if (!SHA256_HEX.test(hex)) {
    throw new FetchError(
      "invalid_checksums",
      `${origin}: "${hex}" for ${path} is not a sha256 hex digest`,
    );
  }
  const digest = hex.toLowerCase();
  const previous = sums[path];
  if (previous !== undefined && previous !== digest) {
    throw new FetchError(
      "invalid_checksums",
      `${origin} lists ${path} twice with different digests`,
    );
  }
  sums[path] = digest;
}
