import type { ChatMessage } from "../../api/input-items.js";

/**
 * A conversation cut into turns, oldest first, for truncation, which drops
 * whole turns: a turn is the messages up to and including an answer (the
 * assistant messages that follow the others), and the last turn is what
 * follows the last answer (the new input). A stored response continued with
 * `previous_response_id` comes to the runtime as its input items then its
 * output (gateway/routes/conversation.ts): one turn here, as long as its input
 * held no assistant message of its own (a caller replaying a conversation in
 * one request has its turns cut the same way).
 */
export function turnsOf(messages: readonly ChatMessage[]): ChatMessage[][] {
  const turns: ChatMessage[][] = [];
  let current: ChatMessage[] = [];
  messages.forEach((message, i) => {
    current.push(message);
    const next = messages[i + 1];
    if (message.role === "assistant" && next !== undefined && next.role !== "assistant") {
      turns.push(current);
      current = [];
    }
  });
  if (current.length > 0) turns.push(current);
  return turns;
}

/**
 * The newest items that fit, dropping the oldest first and never the last
 * one. A shorter conversation renders no longer, so what fits is a run of
 * suffixes: a binary search renders the prompt a logarithmic number of
 * times, where dropping one item at a time rendered it once per item, and
 * a long conversation held the runtime's one thread for seconds.
 */
export function keepNewest<T>(items: readonly T[], fits: (kept: readonly T[]) => boolean): T[] {
  let low = 0;
  let high = Math.max(0, items.length - 1);
  while (low < high) {
    const middle = (low + high) >> 1;
    if (fits(items.slice(middle))) high = middle;
    else low = middle + 1;
  }
  return items.slice(low);
}
