import { createHash } from "node:crypto";
import { watch, type FSWatcher } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";

export interface FileWatcherOptions {
  path: string;
  /** Content of the file when it differs from the last content seen. */
  onChange: (text: string) => void;
  /** A read that failed (the file is missing, unreadable). */
  onError: (error: Error) => void;
  /** The content already loaded, so the first check does not report it again. */
  initialText?: string;
  /** Poll period, the fallback for file systems where fs.watch is silent. */
  pollIntervalMs?: number;
  /** Events arrive in bursts (a Secret update renames several entries); read once after them. */
  debounceMs?: number;
}

export const DEFAULT_POLL_INTERVAL_MS = 2_000;
const DEFAULT_DEBOUNCE_MS = 50;

/**
 * Watches one file for content changes, by path.
 *
 * Kubernetes updates a mounted Secret by writing a new timestamped folder and
 * atomically swapping the `..data` symlink the file's path goes through; the
 * file itself is never modified in place, so watching its inode misses the
 * update. We therefore watch the folder (any event there triggers a check),
 * poll as a fallback (network and overlay file systems may send no events),
 * and decide on change by re-reading the file by path and comparing a sha256
 * of its content: a file of keys is small, and content is the only thing that
 * matters.
 */
export class FileWatcher {
  private readonly options: Required<Omit<FileWatcherOptions, "initialText">>;
  private lastDigest: string | undefined;
  private lastErrorCode: string | undefined;
  private dirWatcher: FSWatcher | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private debounceTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private rerun = false;
  private closed = false;

  constructor(options: FileWatcherOptions) {
    this.options = {
      pollIntervalMs: DEFAULT_POLL_INTERVAL_MS,
      debounceMs: DEFAULT_DEBOUNCE_MS,
      ...options,
    };
    if (options.initialText !== undefined) this.lastDigest = digest(options.initialText);
  }

  start(): void {
    try {
      this.dirWatcher = watch(dirname(this.options.path), { persistent: false }, () =>
        this.schedule(),
      );
      // inotify limits or a vanished folder: polling still covers us.
      this.dirWatcher.on("error", () => this.stopDirWatcher());
    } catch {
      this.dirWatcher = undefined;
    }
    this.pollTimer = setInterval(() => void this.check(), this.options.pollIntervalMs);
    this.pollTimer.unref();
  }

  /** Reads the file now; resolves once the read (and any callback) is done. */
  check(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      // A change may have landed after the running read started: read again after it.
      this.rerun = true;
      return this.running;
    }
    this.running = this.readOnce().finally(() => {
      this.running = undefined;
      if (this.rerun && !this.closed) {
        this.rerun = false;
        void this.check();
      }
    });
    return this.running;
  }

  close(): void {
    this.closed = true;
    this.stopDirWatcher();
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.debounceTimer) clearTimeout(this.debounceTimer);
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.debounceTimer) clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => void this.check(), this.options.debounceMs);
    this.debounceTimer.unref();
  }

  private async readOnce(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.options.path, "utf8");
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "unknown";
      // Report a lasting failure once, not every poll.
      if (code !== this.lastErrorCode) this.options.onError(error as Error);
      this.lastErrorCode = code;
      return;
    }
    this.lastErrorCode = undefined;
    const current = digest(text);
    if (current === this.lastDigest) return;
    this.lastDigest = current;
    if (!this.closed) this.options.onChange(text);
  }

  private stopDirWatcher(): void {
    this.dirWatcher?.close();
    this.dirWatcher = undefined;
  }
}

function digest(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
