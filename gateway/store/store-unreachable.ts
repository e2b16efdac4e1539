/**
 * Whether a failed store call means the database could not be reached or
 * could not take the work just now (a retry may succeed), rather than that
 * the call itself was wrong. The API answers the first with a 503 and
 * `Retry-After`; the second stays a 500, which is a bug to see.
 *
 * - PostgreSQL's SQLSTATE classes 08 (connection exception) and 53
 *   (insufficient resources: too many connections), 57P01 to 57P03 (the
 *   server shutting down or starting), 40001 and 40P01 (serialization
 *   failure, deadlock: the transaction may be retried) and 55P03 (lock not
 *   available).
 * - No SQLSTATE: the socket failed (refused, reset, timed out), or `pg` gave
 *   up waiting for a connection or an answer.
 */
const TRANSIENT_SQLSTATES = new Set(["57P01", "57P02", "57P03", "40001", "40P01", "55P03"]);
const TRANSIENT_CLASSES = ["08", "53"];
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);
/** What `pg` says when a connection or a query was lost or timed out. */
const PG_CLIENT_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error)/;

/** Raised without asking the database: it is known down, or did not answer a read in time. */
export class StoreUnreachableError extends Error {
  override name = "StoreUnreachableError";
}

export function isStoreUnreachable(error: unknown): boolean {
  if (error instanceof StoreUnreachableError) return true;
  for (let cause = error, depth = 0; depth < 4 && isObject(cause); depth++) {
    const code = typeof cause.code === "string" ? cause.code : undefined;
    if (code !== undefined && /^[0-9A-Z]{5}$/.test(code)) {
      return TRANSIENT_SQLSTATES.has(code) || TRANSIENT_CLASSES.includes(code.slice(0, 2));
    }
    if (code !== undefined && SOCKET_CODES.has(code)) return true;
    if (typeof cause.message === "string" && PG_CLIENT_MESSAGES.test(cause.message)) return true;
    cause = cause.cause;
  }
  return false;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}
