/**
 * Reads a text/event-stream body into its events, for tests: written from
 * the SSE format itself (frames end at a blank line; `event:` and `data:`
 * lines), independent of the parser the gateway uses.
 */
export interface ReadEvent {
  event: string;
  data: Record<string, unknown> & { type: string; sequence_number: number };
}

export function parseEventStream(text: string): ReadEvent[] {
  const events: ReadEvent[] = [];
  for (const frame of text.split("\n\n")) {
    if (frame.trim() === "") continue;
    let event = "";
    const data: string[] = [];
    for (const line of frame.split("\n")) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
    }
    events.push({ event, data: JSON.parse(data.join("\n")) as ReadEvent["data"] });
  }
  return events;
}

/** The concatenated output_text deltas of a stream. */
export function deltasOf(events: readonly ReadEvent[]): string {
  return events
    .filter((e) => e.data.type === "response.output_text.delta")
    .map((e) => e.data.delta as string)
    .join("");
}

/** The event types in the order the Responses API sends them around the deltas. */
export function expectedOrder(deltas: number, terminal: string): string[] {
  return [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    ...Array.from({ length: deltas }, () => "response.output_text.delta"),
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    terminal,
  ];
}
