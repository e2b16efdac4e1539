/**
 * What every benchmark run starts with: progress lines stamped with seconds
 * since the start, and a watchdog. Every loop is bounded by count and time
 * already; the watchdog catches a hang outside them, so a run always stops.
 */
export function startRun(deadlineMs: number): {
  log: (line: string) => void;
  /** Seconds since the run started. */
  elapsedSeconds: () => number;
} {
  const started = performance.now();
  const log = (line: string) => {
    const seconds = ((performance.now() - started) / 1000).toFixed(1).padStart(6);
    process.stdout.write(`[${seconds}s] ${line}\n`);
  };
  const watchdog = setTimeout(() => {
    log(`benchmark overran its ${deadlineMs / 1000} s deadline; giving up`);
    process.exit(1);
  }, deadlineMs);
  watchdog.unref();
  return { log, elapsedSeconds: () => (performance.now() - started) / 1000 };
}
