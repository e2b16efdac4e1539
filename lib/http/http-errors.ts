import { defineError } from "../coded-error.js";

/** Errors of the HTTP layer that every server of ours shares. Listed in docs/errors.md. */
export const HttpErrors = {
  invalidJson: defineError(
    "invalid_json",
    400,
    "invalid_request_error",
    (detail: string) => `The request body is not valid JSON: ${detail}`,
  ),
  unsupportedContentType: defineError(
    "unsupported_content_type",
    400,
    "invalid_request_error",
    (got: string) => `Content-Type must be application/json; got '${got}'.`,
  ),
  /** A compressed body: the servers read bodies as sent (`identity`) only. */
  unsupportedContentEncoding: defineError(
    "unsupported_content_encoding",
    400,
    "invalid_request_error",
    (got: string) => `Content-Encoding '${got}' is not supported; send the body uncompressed.`,
  ),
  /** A body that fails the ResponsesRequest schema; `param` names the field. */
  invalidRequest: defineError(
    "invalid_request",
    400,
    "invalid_request_error",
    (message: string, _param: string | null) => message,
    (_message, param) => ({ param }),
  ),
  notFound: defineError(
    "not_found",
    404,
    "invalid_request_error",
    (method: string, url: string) => `No route for ${method} ${url.split("?")[0]}.`,
  ),
  /** A path parameter longer than the router takes: no id is that long, so nothing is there. */
  paramTooLong: defineError(
    "not_found",
    404,
    "invalid_request_error",
    (maxLength: number) => `Nothing here has an id longer than ${maxLength} characters.`,
  ),
  /** A path the router cannot decode (a malformed percent-encoding). */
  badUrl: defineError(
    "invalid_request",
    400,
    "invalid_request_error",
    () => "The URL's path is not valid: a percent-encoding in it is malformed.",
  ),
  /**
   * Bytes Node's HTTP parser refuses before any route runs: a malformed
   * request line or header name, a Content-Length beside a Transfer-Encoding,
   * two different Content-Lengths. Nothing of the request is echoed.
   */
  malformedRequest: defineError(
    "invalid_request",
    400,
    "invalid_request_error",
    () =>
      "The request is not well-formed HTTP/1.1: a malformed request line or header, or a conflicting Content-Length or Transfer-Encoding.",
  ),
  /** The path exists, but not with this method; the `Allow` header lists the methods it serves. */
  methodNotAllowed: defineError(
    "method_not_allowed",
    405,
    "invalid_request_error",
    (method: string, path: string, allowed: readonly string[]) =>
      `${path} does not serve ${method}; it serves ${allowed.join(", ")}.`,
  ),
  /** The request was not received in full within the server's request timeout. */
  requestNotReceived: defineError(
    "request_receive_timeout",
    408,
    "invalid_request_error",
    (seconds: number) => `The request was not received in full within ${seconds} s.`,
  ),
  bodyTooLarge: defineError(
    "request_too_large",
    413,
    "invalid_request_error",
    (limitBytes: number) => `The request body is larger than the limit of ${limitBytes} bytes.`,
  ),
  /** The request line and headers together are over the HTTP server's limit (Node's 16 KiB by default). */
  headersTooLarge: defineError(
    "headers_too_large",
    431,
    "invalid_request_error",
    (limitBytes: number) =>
      `The request's headers are larger than the limit of ${limitBytes} bytes.`,
  ),
} as const;
