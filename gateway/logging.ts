import { pino, type DestinationStream, type Logger, type LoggerOptions } from "pino";
import { REDACTED_PATHS } from "../lib/logger.js";

/**
 * The gateway's logger. Beyond the header redaction every logger of ours
 * has, each line is scrubbed as the last step before it is written: anything
 * shaped like one of our API keys (`mg_live_…`, `mg_test_…`) or like the
 * digest of a `pay-signature` (`v1=…`, `v2=…`) is replaced, wherever it
 * appears (a URL, an id a caller chose, an error message, a stack). A secret
 * a careless client puts somewhere we did not expect still never reaches
 * the log.
 */
const KEY_SHAPE = /mg_(live|test)_[A-Za-z0-9]+/g;
const DIGEST_SHAPE = /\b(v[12])=[A-Za-z0-9]{8,}/g;

/** A log line with every key and signature digest replaced; returns the line itself when it has none. */
export function scrubSecrets(line: string): string {
  // The common case (no marker at all) costs two substring searches.
  const hasKey = line.includes("mg_");
  const hasDigest = line.includes("v1=") || line.includes("v2=");
  if (!hasKey && !hasDigest) return line;
  let out = line;
  if (hasKey) out = out.replace(KEY_SHAPE, "mg_$1_[redacted]");
  if (hasDigest) out = out.replace(DIGEST_SHAPE, "$1=[redacted]");
  return out;
}

export function gatewayLoggerOptions(level: string): LoggerOptions {
  return {
    level,
    name: "gateway",
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
    hooks: { streamWrite: scrubSecrets },
  };
}

/**
 * Lines go to `destination`, by default stdout with one synchronous write
 * each (as lib/logger.ts explains: cheaper per line than a hand-off to the
 * thread pool when lines come one at a time).
 */
export function createGatewayLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    gatewayLoggerOptions(level),
    destination ?? pino.destination({ dest: 1, sync: true }),
  );
}
