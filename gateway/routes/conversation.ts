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
export function historyOf(turns: readonly StoredResponseRow[]): ChatMessage[] {
  return turns.flatMap((turn) => {
    const items = JSON.parse(turn.inputItems) as StoredInputItem[];
    const inputs = items.map((item) => ({
      role: item.role,
      content: item.content.map((part) => part.text).join(""),
    }));
    return [...inputs, ...outputMessagesOf(JSON.parse(turn.response))];
  });
}

/** The body the runtime gets: the caller's, with the history before its input. */
export function continuedBody(raw: Buffer, history: readonly ChatMessage[]): Buffer {
  const body = JSON.parse(raw.toString("utf8")) as { input: unknown };
  const input =
    typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input;
  const messages = history.map((m) => ({ type: "message", role: m.role, content: m.content }));
  return Buffer.from(JSON.stringify({ ...body, input: [...messages, ...(input as unknown[])] }));
}
