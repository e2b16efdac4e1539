/**
 * The closed set of coded errors of the model-fetch component.
 *
 * Codes are stable snake_case strings: the CLI prints them, the operator may
 * surface them in a condition message, and docs/errors.md lists them. A code
 * that is retired is never reused for a different meaning.
 */

export const FETCH_ERROR_CODES = [
  "invalid_source_uri",
  "unsupported_source_scheme",
  "invalid_fetch_options",
  "file_list_required",
  "invalid_checksums",
  "source_not_found",
  "access_denied",
  "missing_file",
  "unsafe_path",
  "download_failed",
  "size_mismatch",
  "checksum_mismatch",
  "invalid_destination",
  "fetch_aborted",
] as const;

export type FetchErrorCode = (typeof FETCH_ERROR_CODES)[number];

export interface FetchErrorOptions {
  /** True when the same request may succeed if tried again (5xx, reset connection). */
  retryable?: boolean;
  /** HTTP status of the response that caused the error, when there was one. */
  status?: number;
  cause?: unknown;
}

export class FetchError extends Error {
  override readonly name = "FetchError";
  readonly code: FetchErrorCode;
  readonly retryable: boolean;
  readonly status: number | undefined;

  constructor(code: FetchErrorCode, message: string, options: FetchErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.status = options.status;
  }
}

export function isFetchError(err: unknown): err is FetchError {
  return err instanceof FetchError;
}

/**
 * Maps an HTTP status that is not a success to the component's error.
 * `what` names the URL (already redacted) or the file, so the message alone
 * tells an operator what failed.
 */
export function errorForStatus(status: number, what: string, hint = ""): FetchError {
  const suffix = hint ? ` (${hint})` : "";
  if (status === 404 || status === 410) {
    return new FetchError("source_not_found", `${what}: HTTP ${status} not found${suffix}`, {
      status,
    });
  }
  if (status === 401 || status === 403) {
    return new FetchError("access_denied", `${what}: HTTP ${status} access denied${suffix}`, {
      status,
    });
  }
  // 408 and 429 are the client errors that mean "try again later".
  const retryable = status >= 500 || status === 408 || status === 429;
  return new FetchError("download_failed", `${what}: HTTP ${status}${suffix}`, {
    status,
    retryable,
  });
}

/** One line for people: `code: message`, whatever was thrown. */
export function describeError(err: unknown): string {
  if (isFetchError(err)) return `${err.code}: ${err.message}`;
  if (err instanceof Error) return err.message;
  return String(err);
}
