import type { ChatMessage } from "../../api/input-items.js";
import { outputMessagesOf, type StoredInputItem } from "../../api/stored-responses.js";
import type { StoredResponseRow } from "../store/stored-responses.js";

/**
 * `previous_response_id`: the stored turns, oldest first, become message
 * items before the new input: each turn's input items as sent, then its
 * answer as an assistant message. The earlier turns' `instructions` are not
 * carried over (as the OpenAI API does): only the new request's apply. The
 * runtime renders the list as any conversation and applies the token limit
 * to the whole; with `truncation: auto` the oldest turns go first, whole
 * (each ends with its answer, which is how the runtime cuts turns).
 */

/** Each stored turn's messages: its input items, then its answer. */
export function turnsOf(rows: readonly StoredResponseRow[]): ChatMessage[][] {
  return rows.map((row) => {
    const items = JSON.parse(row.inputItems) as StoredInputItem[];
    const inputs = items.map((item) => ({
      role: item.role,
      content: item.content.map((part) => part.text).join(""),
    }));
    return [...inputs, ...outputMessagesOf(JSON.parse(row.response))];
  });
}

/**
 * Stored text read back for a continuation, as a multiple of what may be
 * forwarded: a stored turn holds more than it forwards (item ids, the
 * response object's other fields, its echoed `instructions`), so reading
 * four times the limit finds every turn that could fit in all but
 * contrived chains, and bounds what one request holds in memory.
 */
export const READ_BACK_FACTOR = 4;

export interface ContinuationLimits {
  /** The most bytes the runtime gets: the gateway's body limit. */
  limitBytes: number;
  /** Whether the oldest turns may be left out (`truncation: auto` on a model that truncates). */
  canDrop: boolean;
  /** Older turns exist than those read back (stored-responses.ts). */
  olderUnread: boolean;
}

export type Continued =
  | { kind: "fits"; body: Buffer; droppedTurns: number }
  /** Nothing may be dropped, and the whole is over the limit; `bytes` is at least its size. */
  | { kind: "too-large"; bytes: number };

/**
 * The body the runtime gets: the caller's, with the stored turns before its
 * input. A conversation can outgrow what a request may carry (its turns
 * are only bounded by the model's context once the runtime reads them), so
 * when the whole is over the limit the oldest turns are left out, whole,
 * where truncation may drop them: the runtime's own truncation drops the
 * oldest first too, and a megabyte is already far more text than most
 * models' context holds. Where nothing may be dropped, it is too large.
 *
 * Sizes are exact: the forwarded input array is `[` + its items joined by
 * commas + `]`, so each turn adds its messages' JSON and a comma each.
 */
export function continuedBody(
  raw: Buffer,
  turns: readonly (readonly ChatMessage[])[],
  limits: ContinuationLimits,
): Continued {
  const body = JSON.parse(raw.toString("utf8")) as { input: unknown };
  const input = (
    typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input
  ) as unknown[];
  const items = turns.map((turn) =>
    turn.map((m) => ({ type: "message", role: m.role, content: m.content })),
  );
  const sizes = items.map((turn) =>
    turn.reduce((sum, item) => sum + Buffer.byteLength(JSON.stringify(item)) + 1, 0),
  );
  const base = Buffer.byteLength(JSON.stringify({ ...body, input }));
  const whole = sizes.reduce((sum, size) => sum + size, base);
  let kept = items.length;
  if (limits.olderUnread || whole > limits.limitBytes) {
    if (!limits.canDrop) return { kind: "too-large", bytes: whole };
    // The newest turns that fit, walking back from the last.
    let size = base;
    kept = 0;
    while (kept < items.length && size + sizes[items.length - 1 - kept]! <= limits.limitBytes) {
      size += sizes[items.length - 1 - kept]!;
      kept += 1;
    }
  }
  const history = items.slice(items.length - kept).flat();
  return {
    kind: "fits",
    body: Buffer.from(JSON.stringify({ ...body, input: [...history, ...input] })),
    droppedTurns: items.length - kept,
  };
}
