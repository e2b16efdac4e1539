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

export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  const config: LoggerOptions = {
    level: options.level ?? process.env.LOG_LEVEL ?? "info",
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
  };
  if (options.name) config.name = options.name;
  return pino(config);
}
