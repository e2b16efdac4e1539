import { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { Checksums } from "./checksums.js";

/**
 * The one interface every URI scheme implements: list the files of a model,
 * and open one file's bytes from an offset. Everything else (staging,
 * resume bookkeeping, hashing, retries, the atomic rename) is scheme-agnostic
 * and lives in the callers.
 */
export interface ModelSource {
  /** Printable identity, no secrets: recorded in the marker and in logs. */
  readonly description: string;
  list(signal?: AbortSignal): Promise<SourceListing>;
  /**
   * Opens `path` (a name from the listing) at byte `start`. A source that
   * cannot honour the offset (a server ignoring Range) answers with
   * `offset: 0` and the whole file; the caller restarts the file then.
   */
  open(path: string, start: number, signal?: AbortSignal): Promise<OpenedFile>;
}

export interface SourceFile {
  /** Name as the source spells it, relative to the model root. Untrusted. */
  path: string;
  size?: number | undefined;
  /** A digest the source itself vouches for (the hub's LFS sha256). */
  sha256?: string | undefined;
}

export interface SourceListing {
  files: SourceFile[];
  /** The immutable revision the listing was taken at (a commit sha), when the scheme has one. */
  revision?: string | undefined;
  /** Checksums the listing came with (the http scheme's SHA256SUMS). */
  checksums?: Checksums | undefined;
}

export interface OpenedFile {
  body: AsyncIterable<Uint8Array>;
  /** The byte offset the body starts at: `start`, or 0 when the range was ignored. */
  offset: number;
  /** Total size of the file, when the source says. */
  size?: number | undefined;
}

/** Settings a source may need, resolved from options and environment beforehand. */
export interface SourceContext {
  /** HTTP client for the http and hf schemes: pooled, with the extra CA and redirects. */
  dispatcher: Dispatcher;
  /** Hub or S3 endpoint override. */
  endpoint?: string | undefined;
  hfToken?: string | undefined;
  revision?: string | undefined;
  /** File list for an http source without SHA256SUMS. */
  files?: readonly string[] | undefined;
  s3: S3Settings;
  ca?: string | undefined;
}

export interface S3Settings {
  region: string;
  endpoint?: string | undefined;
  /** Explicit credentials; when absent the SDK's default provider chain is used. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | undefined;
}

/** An empty body, for a resume that found the file already complete. */
export function emptyBody(): AsyncIterable<Uint8Array> {
  return Readable.from([]);
}
