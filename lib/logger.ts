import { pino, type Logger, type LoggerOptions } from "pino";

export type { Logger };

/**
 * Structured JSON logs. Credentials travel in headers, so every header that
 * can carry one is redacted wherever it appears in a log object.
 */
export const REDACTED_PATHS = [
  "req.headers.authorization",
  'req.headers["x-api-key"]',
  'req.headers["pay-signature"]',
  "headers.authorization",
  'headers["x-api-key"]',
  'headers["pay-signature"]',
];

/**
 * Lines go to stdout with one synchronous write each, as console.log does
 * for the pipe a container's stdout is. pino's default (asynchronous writes
 * through the thread pool) costs a hand-off to a worker thread and back per
 * line when lines come one at a time, which is how a server under light load
 * writes its one line per request; nothing is buffered to lose in a crash.
 */
export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  const config: LoggerOptions = {
    level: options.level ?? process.env.LOG_LEVEL ?? "info",
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
  };
  if (options.name) config.name = options.name;
  return pino(config, pino.destination({ dest: 1, sync: true }));
}
