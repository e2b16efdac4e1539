import { constants } from "node:fs";
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
  /** Runs synchronously once the data is on disk, before anything else is queued. */
  onDurable: () => void;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * An append-only file whose appends resolve only once on disk.
 *
 * Appends that arrive while a flush is under way are gathered and written by
 * the next flush with one write (group commit), so the cost of durability is
 * shared by concurrent requests instead of paid by each. A durable journal is
 * opened with O_DSYNC: each write returns once its data and the file size are
 * on disk, as write + fdatasync would, in one trip to the thread pool instead
 * of two. The size is all a reader of appended lines needs.
 */
export class JournalFile {
  private handle: FileHandle;
  private size: number;
  private buffer: Pending[] = [];
  private flushQueued = false;

  private constructor(
    readonly path: string,
    handle: FileHandle,
    size: number,
    private readonly queue: SerialQueue,
    private readonly durable: boolean,
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
    options: { durable?: boolean } = {},
  ): Promise<{ journal: JournalFile; lines: string[]; tornBytes: number }> {
    const durable = options.durable ?? true;
    const handle = await open(path, appendFlags(durable, "read"));
    try {
      const text = await handle.readFile({ encoding: "utf8" });
      const split = splitCompleteLines(text);
      const total = Buffer.byteLength(text, "utf8");
      if (split.torn) {
        await handle.truncate(split.completeBytes);
        await handle.datasync();
      }
      const journal = new JournalFile(path, handle, split.completeBytes, queue, durable);
      return { journal, lines: split.lines, tornBytes: total - split.completeBytes };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Appends `data` (whole lines); resolves once it is written, and on disk if the journal is durable. */
  append(data: string, onDurable: () => void = () => {}): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.buffer.push({ data, onDurable, resolve, reject });
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
    this.handle = await open(this.path, appendFlags(this.durable, "write"));
    this.size = Buffer.byteLength(content, "utf8");
  }

  /** Closes the file once every queued append has been written. */
  async close(): Promise<void> {
    await this.queue.idle();
    await this.handle.close();
  }

  private async flush(): Promise<void> {
    const batch = this.buffer;
    this.buffer = [];
    this.flushQueued = false;
    if (batch.length === 0) return;
    const data = batch.map((item) => item.data).join("");
    try {
      await this.handle.write(data);
      this.size += Buffer.byteLength(data, "utf8");
    } catch (error) {
      // A failed write (disk full) may have left part of a line: cut back to
      // the last good size so later appends do not follow garbage.
      await this.handle.truncate(this.size).catch(() => undefined);
      for (const item of batch) item.reject(error);
      return;
    }
    for (const item of batch) {
      item.onDurable();
      item.resolve();
    }
  }
}

/** Open flags for appending; a durable journal's writes are synchronous (O_DSYNC). */
function appendFlags(durable: boolean, access: "read" | "write"): number {
  const base = (access === "read" ? constants.O_RDWR : constants.O_WRONLY) | constants.O_APPEND;
  return base | constants.O_CREAT | (durable ? constants.O_DSYNC : 0);
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
