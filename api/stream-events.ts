import { z } from "zod";
import { outputMessageSchema, responsesResponseSchema } from "./responses-response.js";

/**
 * The semantic events of a streamed Responses answer (`stream: true`), as
 * the OpenAI Responses API sends them over `text/event-stream`: one
 * `event:`/`data:` pair per event, no `[DONE]` line. The runtime emits them
 * in this order for its one output message:
 *
 *   response.created, response.in_progress, response.output_item.added,
 *   response.content_part.added, response.output_text.delta (one per decoded
 *   piece), response.output_text.done, response.content_part.done,
 *   response.output_item.done, then exactly one terminal event:
 *   response.completed, response.incomplete or response.failed.
 *
 * `sequence_number` counts from 0 over the whole stream; the one message is
 * output 0 and its text is content part 0.
 */

/** A Responses object while it is being streamed: `in_progress` until its terminal event. */
export const streamedMessageSchema = outputMessageSchema.extend({
  status: z.enum(["in_progress", "completed", "incomplete"]),
});

export const streamedResponseSchema = responsesResponseSchema.extend({
  status: z.enum(["in_progress", "completed", "incomplete", "failed"]),
  output: z.array(streamedMessageSchema),
  /**
   * The payment route only, in the terminal event: the usage settled with
   * the payment provider, exactly as the `pay-usage` trailer states it.
   */
  pay_usage: z.string().optional(),
});
export type StreamedResponse = z.infer<typeof streamedResponseSchema>;
export type StreamedMessage = z.infer<typeof streamedMessageSchema>;

const outputTextPart = z.object({
  type: z.literal("output_text"),
  text: z.string(),
  annotations: z.array(z.unknown()),
});

const sequenced = { sequence_number: z.number().int().min(0) };
const located = {
  ...sequenced,
  item_id: z.string(),
  output_index: z.number().int().min(0),
  content_index: z.number().int().min(0),
};

export const TERMINAL_EVENT_TYPES = [
  "response.completed",
  "response.incomplete",
  "response.failed",
] as const;
export type TerminalEventType = (typeof TERMINAL_EVENT_TYPES)[number];

const responseEvent = <T extends string>(type: T) =>
  z.object({ type: z.literal(type), ...sequenced, response: streamedResponseSchema });

export const streamEventSchema = z.discriminatedUnion("type", [
  responseEvent("response.created"),
  responseEvent("response.in_progress"),
  z.object({
    type: z.literal("response.output_item.added"),
    ...sequenced,
    output_index: z.number().int().min(0),
    item: streamedMessageSchema,
  }),
  z.object({ type: z.literal("response.content_part.added"), ...located, part: outputTextPart }),
  z.object({
    type: z.literal("response.output_text.delta"),
    ...located,
    delta: z.string(),
    logprobs: z.array(z.unknown()),
  }),
  z.object({
    type: z.literal("response.output_text.done"),
    ...located,
    text: z.string(),
    logprobs: z.array(z.unknown()),
  }),
  z.object({ type: z.literal("response.content_part.done"), ...located, part: outputTextPart }),
  z.object({
    type: z.literal("response.output_item.done"),
    ...sequenced,
    output_index: z.number().int().min(0),
    item: streamedMessageSchema,
  }),
  responseEvent("response.completed"),
  responseEvent("response.incomplete"),
  responseEvent("response.failed"),
]);
export type StreamEvent = z.infer<typeof streamEventSchema>;

export function isTerminalEventType(type: string): type is TerminalEventType {
  return (TERMINAL_EVENT_TYPES as readonly string[]).includes(type);
}

/** One event as a `text/event-stream` frame. */
export function sseFrame(event: StreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** The terminal event type of a finished response. */
export function terminalTypeOf(response: {
  status: StreamedResponse["status"];
}): TerminalEventType {
  if (response.status === "completed") return "response.completed";
  if (response.status === "incomplete") return "response.incomplete";
  return "response.failed";
}

/**
 * Builds the events of one streamed response in order, numbering them. The
 * caller gives the response as it is when streaming starts (status
 * `in_progress`, no output, no usage) and, at the end, the finished one.
 */
export class ResponseEvents {
  private sequence = 0;
  private text = "";
  private opened = false;

  constructor(
    private readonly started: StreamedResponse,
    readonly itemId: string,
  ) {}

  private next(): number {
    return this.sequence++;
  }

  /** Events numbered so far: the next event's sequence_number. */
  get count(): number {
    return this.sequence;
  }

  /** created, in_progress, then the message and its text part, still empty. */
  open(): StreamEvent[] {
    this.opened = true;
    const item = this.item("in_progress", []);
    const where = { item_id: this.itemId, output_index: 0, content_index: 0 };
    return [
      { type: "response.created", sequence_number: this.next(), response: this.started },
      { type: "response.in_progress", sequence_number: this.next(), response: this.started },
      { type: "response.output_item.added", sequence_number: this.next(), output_index: 0, item },
      {
        type: "response.content_part.added",
        sequence_number: this.next(),
        ...where,
        part: { type: "output_text", text: "", annotations: [] },
      },
    ];
  }

  delta(piece: string): StreamEvent {
    this.text += piece;
    return {
      type: "response.output_text.delta",
      sequence_number: this.next(),
      item_id: this.itemId,
      output_index: 0,
      content_index: 0,
      delta: piece,
      logprobs: [],
    };
  }

  /**
   * The closing events: the text, its part and message done, then the
   * terminal event with the whole response. A failed response (or one that
   * fails before the message was opened) has only its terminal event.
   */
  close(finished: StreamedResponse): StreamEvent[] {
    const terminal = {
      type: terminalTypeOf(finished),
      sequence_number: 0,
      response: finished,
    };
    if (finished.status === "failed" || !this.opened) {
      return [{ ...terminal, sequence_number: this.next() }];
    }
    const status = finished.status === "completed" ? "completed" : "incomplete";
    const part = { type: "output_text" as const, text: this.text, annotations: [] };
    const where = { item_id: this.itemId, output_index: 0, content_index: 0 };
    return [
      {
        type: "response.output_text.done",
        sequence_number: this.next(),
        ...where,
        text: this.text,
        logprobs: [],
      },
      { type: "response.content_part.done", sequence_number: this.next(), ...where, part },
      {
        type: "response.output_item.done",
        sequence_number: this.next(),
        output_index: 0,
        item: this.item(status, [part]),
      },
      { ...terminal, sequence_number: this.next() },
    ];
  }

  /** The text streamed so far: the concatenated deltas. */
  get streamedText(): string {
    return this.text;
  }

  private item(status: StreamedMessage["status"], content: StreamedMessage["content"]) {
    return {
      type: "message" as const,
      id: this.itemId,
      status,
      role: "assistant" as const,
      content,
    };
  }
}

/**
 * Reads `text/event-stream` frames out of arriving chunks: what the gateway
 * uses to find the terminal event while it relays the bytes unchanged.
 * Frames end with a blank line; a chunk may end mid-frame.
 */
export class SseFrameReader {
  private pending = "";

  /** The complete frames in `chunk` (with what came before), each as its raw text. */
  push(chunk: string): string[] {
    this.pending += chunk;
    const frames: string[] = [];
    for (;;) {
      const end = this.pending.indexOf("\n\n");
      if (end < 0) break;
      frames.push(this.pending.slice(0, end + 2));
      this.pending = this.pending.slice(end + 2);
    }
    return frames;
  }

  /** Bytes of an unfinished frame still held. */
  get held(): number {
    return this.pending.length;
  }
}

/** The `event:` and `data:` of one frame (the one-line data this API sends). */
export function parseFrame(frame: string): { event: string | null; data: string | null } {
  let event: string | null = null;
  let data: string | null = null;
  for (const line of frame.split("\n")) {
    if (line.startsWith("event: ")) event = line.slice(7);
    else if (line.startsWith("data: "))
      data = data === null ? line.slice(6) : `${data}\n${line.slice(6)}`;
  }
  return { event, data };
}
