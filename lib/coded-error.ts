/**
 * One helper for every error a client can see. Each component declares its
 * closed set of codes with it (see `runtime/errors.ts`), so the edge can turn
 * any thrown value into a status and a body in one place.
 */
export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "rate_limit_error"
  | "server_error"
  | "internal_error";

export interface CodedErrorOptions {
  param?: string | null;
  /** Seconds a client should wait before retrying (429, 503). */
  retryAfterSeconds?: number;
  /** A body the spec fixes exactly (e.g. `{"error":"invalid_pay_signature"}`), sent as is. */
  body?: unknown;
  cause?: unknown;
}

export class CodedError extends Error {
  readonly code: string;
  readonly statusCode: number;
  readonly type: ErrorType;
  readonly param: string | null;
  readonly retryAfterSeconds: number | undefined;
  readonly body: unknown;

  constructor(
    code: string,
    statusCode: number,
    type: ErrorType,
    message: string,
    options: CodedErrorOptions = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "CodedError";
    this.code = code;
    this.statusCode = statusCode;
    this.type = type;
    this.param = options.param ?? null;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.body = options.body;
  }
}

export interface ErrorDefinition<Args extends unknown[]> {
  readonly code: string;
  readonly statusCode: number;
  readonly type: ErrorType;
  (...args: Args): CodedError;
}

/**
 * Declares one coded error: a stable snake_case code, a status, a type and a
 * message built from the arguments. Calling the result makes the error.
 */
export function defineError<Args extends unknown[]>(
  code: string,
  statusCode: number,
  type: ErrorType,
  message: (...args: Args) => string,
  options: (...args: Args) => CodedErrorOptions = () => ({}),
): ErrorDefinition<Args> {
  const make = (...args: Args): CodedError =>
    new CodedError(code, statusCode, type, message(...args), options(...args));
  return Object.assign(make, { code, statusCode, type });
}

export function isCodedError(value: unknown): value is CodedError {
  return value instanceof CodedError;
}
