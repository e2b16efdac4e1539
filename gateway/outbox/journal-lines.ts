/**
 * The outbox's on-disk formats, as pure functions. Every journal is JSON
 * Lines: one complete JSON object per line, each line ending in "\n". A line
 * is written by one write call, so a crash can only leave the LAST line
 * incomplete (no trailing newline); replay ignores such a tail and the journal
 * file truncates it before appending again.
 *
 *   <name>.records.jsonl  {"key":"<idempotency key>","at":<ms>,"record":<T>}
 *   <name>.acks.jsonl     {"key":"<idempotency key>","at":<ms>,"outcome":"delivered"|"dead"}
 *   <name>.dead.jsonl     {"key":..,"at":..,"attempts":n,"error":"..","record":<T>}
 */

export interface RecordLine<T> {
  key: string;
  at: number;
  record: T;
}

export type AckOutcome = "delivered" | "dead";

export interface AckLine {
  key: string;
  at: number;
  outcome: AckOutcome;
}

export interface DeadLetterLine<T> {
  key: string;
  at: number;
  attempts: number;
  error: string;
  record: T;
}

export function encodeLine(value: RecordLine<unknown> | AckLine | DeadLetterLine<unknown>): string {
  // JSON.stringify escapes newlines inside strings, so a line is always one line.
  return `${JSON.stringify(value)}\n`;
}

export interface SplitLines {
  /** Complete lines, without their "\n". */
  lines: string[];
  /** Bytes (UTF-8) up to and including the last "\n": the part worth keeping. */
  completeBytes: number;
  /** True when the text ends with an incomplete line (a torn write). */
  torn: boolean;
}

export function splitCompleteLines(text: string): SplitLines {
  const end = text.lastIndexOf("\n");
  const complete = end < 0 ? "" : text.slice(0, end + 1);
  const lines = complete.split("\n");
  lines.pop(); // the empty string after the final "\n"
  return {
    lines: lines.filter((line) => line.trim() !== ""),
    completeBytes: Buffer.byteLength(complete, "utf8"),
    torn: end < text.length - 1,
  };
}

export interface Replay {
  /** Records without an ack, in journal order, first copy of each key only. */
  pending: RecordLine<unknown>[];
  /** Keys acked (delivered or dead-lettered) and still in the records journal. */
  acked: Set<string>;
  /** Complete lines that were not valid JSON of the expected shape. */
  corruptLines: number;
}

/**
 * Folds the two journals into what is still owed. Pure. An ack whose record is
 * no longer in the records journal (a compaction ran between them) is ignored.
 */
export function replayJournals(recordLines: string[], ackLines: string[]): Replay {
  let corruptLines = 0;
  const ackedKeys = new Set<string>();
  for (const line of ackLines) {
    const ack = parseObject(line);
    if (ack && typeof ack.key === "string") ackedKeys.add(ack.key);
    else corruptLines += 1;
  }
  const seen = new Set<string>();
  const pending: RecordLine<unknown>[] = [];
  const acked = new Set<string>();
  for (const line of recordLines) {
    const entry = parseObject(line);
    if (!entry || typeof entry.key !== "string" || !("record" in entry)) {
      corruptLines += 1;
      continue;
    }
    if (seen.has(entry.key)) continue;
    seen.add(entry.key);
    if (ackedKeys.has(entry.key)) acked.add(entry.key);
    else pending.push({ key: entry.key, at: Number(entry.at) || 0, record: entry.record });
  }
  return { pending, acked, corruptLines };
}

function parseObject(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
