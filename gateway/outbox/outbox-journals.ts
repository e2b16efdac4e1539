import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import {
  JournalFile,
  SerialQueue,
  syncDirectory,
  type JournalFileOptions,
} from "./journal-file.js";
import {
  encodeLine,
  replayJournals,
  type AckOutcome,
  type DeadLetterLine,
  type RecordLine,
  type Replay,
} from "./journal-lines.js";

export type JournalKind = "records" | "acks" | "dead";

/** Where one of an outbox's files lives: named in logs, so an operator can find what waits. */
export function journalPath(dir: string, name: string, kind: JournalKind): string {
  return join(dir, `${name}.${kind}.jsonl`);
}

/**
 * The three files of one outbox, and the only code that writes them:
 *
 *   <name>.records.jsonl  every record appended, until compaction
 *   <name>.acks.jsonl     every record delivered or dead-lettered, until compaction
 *   <name>.dead.jsonl     records given up on, for an operator; never compacted
 *
 * All writes go through one serial queue, so a compaction (which replaces
 * files) never interleaves with an append. Record appends are written before
 * their promise resolves and synced to disk as `options.sync` says; dead
 * letters are rare and always synced; acks never are.
 */
export class OutboxJournals {
  private constructor(
    private readonly queue: SerialQueue,
    private readonly records: JournalFile,
    private readonly acks: JournalFile,
    private readonly dead: JournalFile,
  ) {}

  /** Opens (creating) the files, cuts torn last lines, and replays what is owed. */
  static async open(
    dir: string,
    name: string,
    options: JournalFileOptions = {},
  ): Promise<{ journals: OutboxJournals; replay: Replay; tornBytes: number }> {
    await mkdir(dir, { recursive: true });
    const queue = new SerialQueue();
    const path = (kind: JournalKind): string => journalPath(dir, name, kind);
    const records = await JournalFile.open(path("records"), queue, options);
    // Acks are not fsynced: an ack lost in a crash only means the record is
    // sent again under the same idempotency key, which the receiver dedupes.
    // That saves an fsync per delivered record.
    const acks = await JournalFile.open(path("acks"), queue, { ...options, sync: "never" });
    const dead = await JournalFile.open(path("dead"), queue, { ...options, sync: "always" });
    // New files exist only once their folder entry is on disk too.
    await syncDirectory(dir);
    const journals = new OutboxJournals(queue, records.journal, acks.journal, dead.journal);
    return {
      journals,
      replay: replayJournals(records.lines, acks.lines),
      tornBytes: records.tornBytes + acks.tornBytes + dead.tornBytes,
    };
  }

  /** `onWritten` runs inside the queue as soon as the line is written. */
  appendRecord(line: RecordLine<unknown>, onWritten: () => void): Promise<void> {
    return this.records.append(encodeLine(line), onWritten);
  }

  appendAck(key: string, outcome: AckOutcome, at: number, onWritten: () => void): Promise<void> {
    return this.acks.append(encodeLine({ key, at, outcome }), onWritten);
  }

  appendDeadLetter(line: DeadLetterLine<unknown>): Promise<void> {
    return this.dead.append(encodeLine(line));
  }

  /**
   * Rewrites the records journal with only what is still owed and empties the
   * acks journal. `stillOwed` is read inside the queue, after every append
   * queued before, so it cannot miss a record. Records first: a crash between
   * the two leaves acks for keys no longer journaled, which replay ignores.
   * `onCompacted` also runs inside the queue, before any later append.
   */
  compact(stillOwed: () => RecordLine<unknown>[], onCompacted: () => void): Promise<void> {
    return this.queue.run(async () => {
      await this.records.replaceContent(stillOwed().map(encodeLine).join(""));
      await this.acks.replaceContent("");
      onCompacted();
    });
  }

  async close(): Promise<void> {
    await this.queue.idle();
    await Promise.all([this.records.close(), this.acks.close(), this.dead.close()]);
  }
}
