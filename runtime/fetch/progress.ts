/**
 * Progress of a fetch, as events for a callback and lines for a logger.
 * Lines carry file names and byte counts only: never URLs with their query
 * strings, never headers, so no token or signature can end up in a log.
 */

export type FetchProgressEvent =
  | { type: "file"; path: string; bytes: number; total: number | undefined; done: boolean }
  | { type: "summary"; files: number; bytes: number; seconds: number; alreadyPresent: boolean };

/** The subset of pino's logger the component uses, so any pino child fits. */
export interface FetchLogger {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
}

export interface ProgressSink {
  onProgress?: ((event: FetchProgressEvent) => void) | undefined;
  logger?: FetchLogger | undefined;
  /** Minimum time between two reports of the same file. */
  intervalMs: number;
  now: () => number;
}

/** A per-file reporter: call `update` on every chunk, it decides when to speak. */
export class FileProgress {
  private last = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly sink: ProgressSink,
    private readonly path: string,
  ) {}

  update(bytes: number, total: number | undefined): void {
    // The last chunk is reported by finish(), once, after verification.
    if (bytes === total) return;
    const now = this.sink.now();
    if (now - this.last < this.sink.intervalMs) return;
    this.last = now;
    this.emit(bytes, total, false);
  }

  finish(bytes: number): void {
    this.emit(bytes, bytes, true);
  }

  private emit(bytes: number, total: number | undefined, done: boolean): void {
    this.sink.onProgress?.({ type: "file", path: this.path, bytes, total, done });
    this.sink.logger?.info(
      { file: this.path, bytes, total, done },
      formatFileProgress(this.path, bytes, total),
    );
  }
}

export function reportSummary(
  sink: ProgressSink,
  summary: { files: number; bytes: number; seconds: number; alreadyPresent: boolean },
): void {
  sink.onProgress?.({ type: "summary", ...summary });
  sink.logger?.info(summary, formatSummary(summary));
}

/** `onnx/model.onnx 12.0 MiB/48.0 MiB (25%)`. Pure. */
export function formatFileProgress(path: string, bytes: number, total: number | undefined): string {
  if (total === undefined || total === 0) return `${path} ${formatBytes(bytes)}`;
  const pct = Math.floor((bytes / total) * 100);
  return `${path} ${formatBytes(bytes)}/${formatBytes(total)} (${pct}%)`;
}

export function formatSummary(summary: {
  files: number;
  bytes: number;
  seconds: number;
  alreadyPresent: boolean;
}): string {
  if (summary.alreadyPresent)
    return `model already present: ${summary.files} files, nothing fetched`;
  return `fetched ${summary.files} files, ${formatBytes(summary.bytes)} in ${summary.seconds.toFixed(1)} s`;
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${UNITS[unit]}`;
}
