import { constants, writeSync } from "node:fs";
import { open, rename, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { splitCompleteLines } from "./journal-lines.js";

/**
 * Runs tasks one after another. The outbox's journals share one, so that a
 * compaction (which replaces files) never interleaves with an append.
 */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  run<R>(task: () => Promise<R>): Promise<R> {
    const result = this.tail.then(task);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Resolves when every task queued so far has finished. */
  idle(): Promise<void> {
    return this.tail.then(() => undefined);
  }
}

interface Pending {
  data: string;
  /** Runs synchronously once the data is written, before anything else is queued. */
  onWritten: () => void;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * When a journal's appends reach the disk itself, not only the kernel's page
 * cache. Either way an append resolves only once written, so a crash of the
 * process loses nothing; what syncing adds is surviving a crash of the
 * machine (power, kernel).
 * - `"always"`: each write returns once on disk (O_DSYNC), as write +
 *   fdatasync would, in one trip to the thread pool instead of two.
 * - `{ everyMs }`: an fdatasync in the background at most that long after a
 *   write, as Redis's `appendfsync everysec` and NATS JetStream's
 *   `sync_interval` do; a machine crash can lose that window.
 * - `"never"`: the kernel writes back when it likes.
 */
export type JournalSync = "always" | "never" | { everyMs: number };

export interface JournalFileOptions {
  sync?: JournalSync;
  /** A background fdatasync failed; it is tried again after the interval. */
  onSyncError?: (error: unknown, path: string) => void;
}

/**
 * An append-only file whose appends resolve once written (and, per its
 * `JournalSync`, on disk).
 *
 * Appends that arrive while a write is under way are gathered and written by
 * the next flush with one write (group commit), so the cost of a write is
 * shared by concurrent requests instead of paid by each. Writes, background
 * syncs and replacements all run in the shared serial queue, so a sync never
 * races a replacement of the file.
 */
export class JournalFile {
  private handle: FileHandle;
  private size: number;
  private buffer: Pending[] = [];
  private flushQueued = false;
  /** Written since the last fdatasync (interval sync only). */
  private unsynced = false;
  private syncTimer: NodeJS.Timeout | undefined;
  private closed = false;

  private constructor(
    readonly path: string,
    handle: FileHandle,
    size: number,
    private readonly queue: SerialQueue,
    private readonly sync: JournalSync,
    private readonly onSyncError: (error: unknown, path: string) => void,
  ) {
    this.handle = handle;
    this.size = size;
  }

  /**
   * Opens (creating) the file, cuts off a torn last line so the next append
   * starts on a fresh line, and returns the complete lines it held.
   */
  static async open(
    path: string,
    queue: SerialQueue,
    options: JournalFileOptions = {},
  ): Promise<{ journal: JournalFile; lines: string[]; tornBytes: number }> {
    const sync = options.sync ?? "always";
    const handle = await open(path, appendFlags(sync, "read"));
    try {
      const text = await handle.readFile({ encoding: "utf8" });
      const split = splitCompleteLines(text);
      const total = Buffer.byteLength(text, "utf8");
      if (split.torn) {
        await handle.truncate(split.completeBytes);
        await handle.datasync();
      }
      const journal = new JournalFile(
        path,
        handle,
        split.completeBytes,
        queue,
        sync,
        options.onSyncError ?? (() => {}),
      );
      return { journal, lines: split.lines, tornBytes: total - split.completeBytes };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Appends `data` (whole lines); resolves once it is written, and on disk if the journal syncs always. */
  append(data: string, onWritten: () => void = () => {}): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.buffer.push({ data, onWritten, resolve, reject });
      if (!this.flushQueued) {
        this.flushQueued = true;
        void this.queue.run(() => this.flush());
      }
    });
  }

  /**
   * Replaces the whole file with `content`, crash-safely: write a temporary
   * file, fsync it, rename it over the journal, fsync the folder. A crash at
   * any point leaves either the old file or the new one. Call inside the queue.
   */
  async replaceContent(content: string): Promise<void> {
    await writeFileDurably(this.path, content);
    await this.handle.close();
    this.handle = await open(this.path, appendFlags(this.sync, "write"));
    this.size = Buffer.byteLength(content, "utf8");
    this.unsynced = false;
  }

  /** Closes the file once every queued append has been written, and synced if it syncs at all. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.syncTimer) clearTimeout(this.syncTimer);
    this.syncTimer = undefined;
    await this.queue.run(() => this.syncNow());
    await this.handle.close();
  }

  private async flush(): Promise<void> {
    const batch = this.buffer;
    this.buffer = [];
    this.flushQueued = false;
    if (batch.length === 0) return;
    const data = Buffer.from(batch.map((item) => item.data).join(""), "utf8");
    try {
      const written = await this.write(data);
      // Short only when the disk is full; what did land is cut back below.
      if (written !== data.length) {
        throw new Error(`short write to ${this.path}: ${written} of ${data.length} bytes`);
      }
      this.size += written;
    } catch (error) {
      // A failed write (disk full) may have left part of a line: cut back to
      // the last good size so later appends do not follow garbage.
      await this.handle.truncate(this.size).catch(() => undefined);
      for (const item of batch) item.reject(error);
      return;
    }
    if (typeof this.sync === "object") {
      this.unsynced = true;
      this.armSync(this.sync.everyMs);
    }
    for (const item of batch) {
      item.onWritten();
      item.resolve();
    }
  }

  /**
   * A write that returns once on disk (O_DSYNC) goes to the thread pool, so
   * the event loop serves requests meanwhile. One that only has to reach the
   * page cache is made right here: a few microseconds, where a trip to the
   * pool and back costs the event loop more than the write itself.
   */
  private async write(data: Buffer): Promise<number> {
    if (this.sync === "always") return (await this.handle.write(data)).bytesWritten;
    return writeSync(this.handle.fd, data);
  }

  /** One timer per interval, not per write: a busy journal syncs once per interval. */
  private armSync(everyMs: number): void {
    if (this.syncTimer || this.closed) return;
    this.syncTimer = setTimeout(() => {
      this.syncTimer = undefined;
      void this.queue.run(() => this.syncNow());
    }, everyMs);
    // A process that exits leaves its writes in the page cache, which the
    // kernel still writes back; the timer need not hold the process.
    this.syncTimer.unref();
  }

  private async syncNow(): Promise<void> {
    if (!this.unsynced) return;
    // Cleared first: appends queue behind this, so none lands mid-sync.
    this.unsynced = false;
    try {
      await this.handle.datasync();
    } catch (error) {
      this.unsynced = true;
      this.onSyncError(error, this.path);
      if (typeof this.sync === "object") this.armSync(this.sync.everyMs);
    }
  }
}

/** Open flags for appending; a journal that syncs always writes with O_DSYNC. */
function appendFlags(sync: JournalSync, access: "read" | "write"): number {
  const base = (access === "read" ? constants.O_RDWR : constants.O_WRONLY) | constants.O_APPEND;
  return base | constants.O_CREAT | (sync === "always" ? constants.O_DSYNC : 0);
}

/** Writes a whole file atomically and durably (temp file, fsync, rename, fsync folder). */
export async function writeFileDurably(path: string, content: string): Promise<void> {
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  const handle = await open(temp, "w");
  try {
    await handle.writeFile(content, "utf8");
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, path);
  await syncDirectory(dirname(path));
}

/** Makes a file's creation or rename durable: the folder entry must reach the disk too. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
