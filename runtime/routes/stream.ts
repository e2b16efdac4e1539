import { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { ResponsesRequest } from "../../api/responses-request.js";
import { completedResponse, failedResponse, newId } from "../../api/responses-response.js";
import {
  ResponseEvents,
  sseFrame,
  type StreamEvent,
  type StreamedResponse,
} from "../../api/stream-events.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import type { RuntimeContext } from "../context.js";
import type { ModelService } from "../model-service.js";
import { adoptResponseId } from "./response-id.js";

/**
 * `stream: true` on the runtime: the Responses API's events over
 * text/event-stream, written as the continuous batch samples each token.
 *
 * Nothing is sent until the model takes the request from its queue; then
 * the head and the opening events leave, before the prompt's prefill, so a
 * reader (the gateway) sets up its side of the stream while the first token
 * is computed. A refusal before that (420, a full queue, a caller gone while
 * waiting) is an ordinary status and envelope; after it, a failure (the
 * prefill's included) is a `response.failed` event. The usage is in the
 * terminal event's response: the gateway meters from it, since headers leave
 * before it is known.
 *
 * The gateway cannot hang up to stop a stream whose client left, because
 * then it would never read the usage of the tokens made so far. It asks
 * `POST /v1/responses/{id}/cancel` instead: the sequence stops within one
 * decode step and the stream ends with `response.incomplete` (reason
 * `client_disconnected`) carrying the exact usage.
 */

/** Streams in progress by response id, so that one can be cancelled. */
export class LiveStreams {
  private readonly live = new Map<string, AbortController>();

  add(id: string, controller: AbortController): void {
    this.live.set(id, controller);
  }

  remove(id: string, controller: AbortController): void {
    if (this.live.get(id) === controller) this.live.delete(id);
  }

  cancel(id: string): boolean {
    const controller = this.live.get(id);
    if (!controller) return false;
    controller.abort(new Error("cancelled by the gateway"));
    return true;
  }
}

/** POST /v1/responses/:id/cancel: stops a live stream; 404 when there is none. */
export function cancelRoute(app: FastifyInstance, streams: LiveStreams): void {
  app.post<{ Params: { id: string } }>("/v1/responses/:id/cancel", (request) => {
    const { id } = request.params;
    if (!streams.cancel(id)) throw HttpErrors.notFound(request.method, request.url);
    return { id, cancelled: true };
  });
}

function startedResponse(body: ResponsesRequest, createdAt: number, id: string): StreamedResponse {
  // The failed envelope is the in-progress one minus its status: no output, no usage yet.
  return {
    ...failedResponse(body, { message: "" }, createdAt, id),
    status: "in_progress",
    error: null,
  };
}

export async function streamResponse(
  body: ResponsesRequest,
  service: ModelService,
  context: RuntimeContext,
  reply: FastifyReply,
  arrivedAt: number,
  signal: AbortSignal,
  streams: LiveStreams,
): Promise<FastifyReply> {
  const responseId = adoptResponseId(reply);
  const createdAt = Math.floor(arrivedAt / 1000);
  const events = new ResponseEvents(startedResponse(body, createdAt, responseId), newId("msg"));
  const lane = service.lane;
  // Validation refuses it first (api/responses-request.ts); this keeps the types honest.
  if (lane.task !== "text-generation") {
    throw HttpErrors.invalidRequest("this model answers in one piece; omit `stream`", "stream");
  }
  const text = lane.generator.textStream();

  // The body Fastify sends and ends. Frames are written straight to the
  // response once its head is out and nothing waits in `out`: pushed through
  // the Readable and the pipe, a token cost about 10 µs more inside the
  // decode loop (docs/streaming-measurements.md, "Ninth session"). Until
  // then they wait in `out`, in order.
  const out = new Readable({ read() {} });
  // A client gone mid-stream destroys `out`; the sequence is stopped by the abort signal.
  out.on("error", () => {});
  const response = reply.raw;
  // A list of events leaves in one write: one packet, one wake-up of the reader.
  const write = (list: StreamEvent[]) => {
    if (out.destroyed || list.length === 0) return;
    let frames = "";
    for (const event of list) frames += sseFrame(event);
    if (response.headersSent && out.readableLength === 0 && !response.destroyed) {
      response.write(frames);
    } else {
      out.push(frames);
    }
    // Node's response corks its socket until the next tick, which comes just
    // before the next decode step's run: the reader, woken by the send, then
    // takes a core from onnxruntime's threads mid-step. Sent now, its wake-up
    // overlaps this step's serial bookkeeping instead (sampling the other
    // rows, freeing the outputs, the next feeds), and the token leaves sooner.
    response.socket?.uncork();
  };
  let opened = false;
  /** The opening events on the first call (and the headers with them); none after. */
  const open = (): StreamEvent[] => {
    if (opened) return [];
    opened = true;
    reply
      .code(200)
      .header("content-type", "text/event-stream; charset=utf-8")
      .header("cache-control", "no-cache")
      .send(out);
    return events.open();
  };

  const cancel = new AbortController();
  streams.add(responseId, cancel);
  try {
    const outcome = await service.generate(body, AbortSignal.any([signal, cancel.signal]), {
      // Opened once the model takes the request, while its prompt runs: a
      // refusal before that (420, a full queue) is still an ordinary status,
      // and a reader (the gateway) sets up its side of the stream during the
      // prefill, not after the first token has come.
      onStart: () => write(open()),
      onToken: (id) => {
        const opening = open();
        const piece = text.push(id);
        write(piece ? [...opening, events.delta(piece)] : opening);
      },
    });
    const opening = open();
    const rest = text.finish(outcome.text);
    write(rest ? [...opening, events.delta(rest)] : opening);
    context.metrics.inputTokens.inc(outcome.inputTokens);
    context.metrics.outputTokens.inc(outcome.outputTokens);
    context.metrics.duration.observe(
      { task: "text-generation" },
      (context.now() - arrivedAt) / 1000,
    );
    const finished: StreamedResponse = completedResponse(
      body,
      {
        text: events.streamedText,
        inputTokens: outcome.inputTokens,
        cachedTokens: outcome.cachedTokens,
        outputTokens: outcome.outputTokens,
        incompleteReason: outcome.incomplete ? "max_output_tokens" : null,
        createdAt,
        completedAt: Math.floor(context.now() / 1000),
      },
      responseId,
    );
    finished.output = finished.output.map((item) => ({ ...item, id: events.itemId }));
    if (outcome.stopReason === "aborted") {
      finished.incomplete_details = { reason: "client_disconnected" };
    }
    write(events.close(finished));
  } catch (error) {
    if (!opened) throw error;
    reply.request.log.error({ err: error, responseId }, "generation failed mid-stream");
    const failed = failedResponse(
      body,
      // What a 500 says, no more: the detail is in the log.
      { type: "internal_error", message: "Internal error" },
      createdAt,
      responseId,
    );
    write(events.close(failed));
  } finally {
    streams.remove(responseId, cancel);
  }
  out.push(null);
  return reply;
}
