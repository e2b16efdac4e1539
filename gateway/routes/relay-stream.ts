import { EventEmitter } from "node:events";
import { Readable } from "node:stream";
import { buffer } from "node:stream/consumers";
import { StringDecoder } from "node:string_decoder";
import type { FastifyReply, FastifyRequest } from "fastify";
import { failedResponse, type ResponsesError } from "../../api/responses-response.js";
import { RESPONSE_ID_HEADER, type Usage } from "../../api/runtime-wire.js";
import {
  SseFrameReader,
  isTerminalEventType,
  parseFrame,
  sseFrame,
  streamEventSchema,
  type StreamEvent,
} from "../../api/stream-events.js";
import { logFieldsOf } from "../../lib/http/log-fields.js";
import { GatewayErrors } from "../errors.js";
import { billUsage, type MeteringParts } from "../plugins/metering.js";
import { responseIdOf } from "../plugins/request-id.js";
import { PAY_USAGE_HEADER } from "../pay/pay-usage.js";
import { phrased, type Upstream } from "../upstream/forward.js";
import { relayOf, relayedHeaders } from "../upstream/relay.js";
import { hasLeft, leftError } from "./client-gone.js";
import { routeConfigOf } from "./route-config.js";
import { storeAnswer, type StoredDeps } from "./stored-responses.handler.js";

/**
 * `stream: true` through the gateway: each event of the runtime's
 * text/event-stream is relayed as soon as its frame is complete, never
 * gathered. Everything the gateway checks (auth, rate limits, the payment
 * allowance) has run before this starts, and an answer that is not a
 * stream (a 420, a 429, a runtime error) is relayed as the ordinary one is.
 *
 * Billing comes from the terminal event's usage, and is journaled before
 * that event leaves, as a whole answer is billed before it is sent. On the
 * payment route the settled usage goes in the terminal event's response
 * (`pay_usage`) and in the `pay-usage` trailer, announced with
 * `Trailer: pay-usage`.
 *
 * A client that leaves mid-stream: the runtime is asked to cancel, which
 * stops the sequence within a decode step and ends the stream with
 * `response.incomplete` and the exact usage so far; the gateway reads on to
 * it and bills those tokens. A stream that breaks before its terminal event
 * (the runtime died) ends with a `response.failed` of the gateway's own and
 * bills nothing: its usage is not known.
 */
export interface StreamRelayDeps extends StoredDeps {
  upstream: Upstream;
  metering: MeteringParts;
}

/**
 * A frame's event type, read from its first line as the runtime writes it
 * (`event:` first); any other layout is read whole. Only the terminal event's
 * data is parsed: the others pass through as bytes.
 */
function eventTypeOf(frame: string): string | null {
  if (frame.startsWith("event: ")) {
    const end = frame.indexOf("\n");
    return frame.slice(7, end < 0 ? undefined : end);
  }
  return parseFrame(frame).event;
}

/** Whether a chunk ends where a frame ends (a blank line), not inside one or inside a character. */
function endsFrame(chunk: Buffer): boolean {
  const n = chunk.length;
  return n >= 2 && chunk[n - 1] === 0x0a && chunk[n - 2] === 0x0a;
}

/** Parses the terminal event; null when it is not one this API sends. */
function terminalEvent(data: string | null): StreamEvent | null {
  if (data === null) return null;
  try {
    const parsed = streamEventSchema.safeParse(JSON.parse(data));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

function usageOf(event: StreamEvent): Usage | null {
  if (!("response" in event) || !event.response.usage) return null;
  const { input_tokens, output_tokens, input_tokens_details } = event.response.usage;
  return {
    inputTokens: input_tokens,
    outputTokens: output_tokens,
    cachedTokens: input_tokens_details.cached_tokens,
  };
}

export async function relayStream(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: StreamRelayDeps,
  body: Buffer,
  preferredEndpoint?: string,
): Promise<FastifyReply> {
  const model = request.model;
  if (!model) throw new Error(`route ${request.routeOptions.url} has no admitted model`);
  // Gone during the checks before the handler: nothing runs, nothing is billed.
  if (hasLeft(reply)) throw leftError();
  const responseId = responseIdOf(request);
  const paid = routeConfigOf(request).metering === "settlement";
  // Before the stream opens, a client that leaves cancels the request itself.
  const abort = new EventEmitter();
  let relaying = false;
  let onLeave: (() => void) | null = null;
  reply.raw.once("close", () => {
    if (reply.raw.writableFinished) return;
    if (relaying) onLeave?.();
    else abort.emit("abort");
  });

  return deps.upstream.stream(
    {
      model,
      body,
      headers: {
        "content-type": "application/json",
        "x-request-id": request.id,
        [RESPONSE_ID_HEADER]: responseId,
      },
      signal: abort,
      preferredEndpoint,
    },
    async (answer, endpoint) => {
      const type = answer.headers["content-type"];
      if (
        answer.statusCode !== 200 ||
        typeof type !== "string" ||
        !type.startsWith("text/event-stream")
      ) {
        // Phrased as the runtime's failure: a bare socket error (ECONNRESET)
        // would reach the app's error handler, which reads socket codes as
        // the database being down, and answer 503 store_unavailable.
        const body = await buffer(answer.body).catch((error: unknown) => {
          throw phrased(error, model);
        });
        const relay = relayOf(answer.statusCode, answer.headers, model.id);
        if (relay.kind === "error") throw relay.error;
        // A 200 that is not a stream is a runtime that cannot stream: refuse, never bill blind.
        if (relay.kind === "success") throw GatewayErrors.upstreamError(model.id);
        return reply.code(answer.statusCode).headers(relayedHeaders(answer.headers)).send(body);
      }

      // Frames are pushed straight into the readable side Fastify pipes to
      // the client: a PassThrough would take each through its writable side
      // and a transform first. Nothing is read back from it, so there is no
      // backpressure to honour beyond the socket's own buffering.
      const out = new Readable({ read() {} });
      // A client gone mid-stream destroys `out`; the relay reads on for the usage.
      out.on("error", () => {});
      let outEnded = false;
      const send = (bytes: string | Buffer) => {
        if (!out.destroyed && !outEnded) out.push(bytes);
      };
      let payUsage: string | null = null;
      reply
        .code(200)
        .header("content-type", type)
        .header("cache-control", "no-cache")
        .header("x-inference-type", "cloud");
      if (paid) {
        // Left out (Fastify skips a trailer that fails) when nothing was settled.
        reply.trailer(PAY_USAGE_HEADER, () =>
          payUsage === null
            ? Promise.reject(new Error("nothing settled"))
            : Promise.resolve(payUsage),
        );
      }
      relaying = true;
      onLeave = () => {
        void deps.upstream.cancel(endpoint, responseId).then((cancelled) => {
          if (!cancelled) request.log.warn(logFieldsOf(request), "could not cancel a left stream");
        });
      };
      void reply.send(out);

      const reader = new SseFrameReader();
      const decoder = new StringDecoder("utf8");
      let relayed = 0;
      let ended = false;
      // The previous chunk ended on a frame's end: neither the reader nor the decoder holds a part.
      let atFrameStart = true;
      // The terminal event: billed, stamped with the settled usage and stored before it leaves.
      const relayTerminal = async (frame: string, event: string) => {
        const terminal = terminalEvent(parseFrame(frame).data);
        const usage = terminal && usageOf(terminal);
        if (!terminal || !("response" in terminal)) throw new Error(`unreadable ${event} event`);
        ended = true;
        if (usage) {
          request.streamedUsage = usage;
          try {
            payUsage = await billUsage(deps.metering, request, model, usage);
          } catch (error) {
            // As a whole answer is a 500 when its billing cannot be journaled.
            request.log.error({ ...logFieldsOf(request), err: error }, "stream not billed");
            send(failedFrame(relayed, { type: "internal_error", message: "Internal error" }));
            return;
          }
        }
        if (payUsage !== null) terminal.response.pay_usage = payUsage;
        // Stored as the terminal event carries it, before that event leaves.
        await storeAnswer(
          deps,
          request,
          terminal.response,
          JSON.stringify(terminal.response),
          endpoint,
        );
        send(sseFrame(terminal));
        relayed++;
      };
      const failedFrame = (sequence: number, error: ResponsesError) =>
        sseFrame({
          type: "response.failed",
          sequence_number: sequence,
          response: failedResponse(
            request.body as Record<string, unknown>,
            error,
            Math.floor(deps.metering.now() / 1000),
            responseId,
          ),
        });
      try {
        for await (const chunk of answer.body as AsyncIterable<Buffer>) {
          // Every event a chunk completes leaves in one write, as it came:
          // one packet to the client rather than one per event.
          const startsFrame = atFrameStart;
          atFrameStart = endsFrame(chunk);
          let passing = "";
          let terminal = false;
          for (const frame of reader.push(decoder.write(chunk))) {
            const event = eventTypeOf(frame);
            if (event === null || !isTerminalEventType(event)) {
              passing += frame;
              relayed++;
              continue;
            }
            terminal = true;
            if (passing) send(passing);
            passing = "";
            await relayTerminal(frame, event);
          }
          if (!passing) continue;
          // A chunk of whole frames, as the runtime writes a token's, leaves
          // as the bytes it came in rather than encoded again from its text.
          send(!terminal && startsFrame && atFrameStart ? chunk : passing);
        }
      } catch (error) {
        request.log.error(
          { ...logFieldsOf(request), endpoint, err: error },
          "stream from the runtime failed",
        );
      }
      if (!ended) {
        const { message, type, code } = GatewayErrors.upstreamError(model.id);
        send(failedFrame(relayed, { message, type, code }));
      }
      outEnded = true;
      if (!out.destroyed) out.push(null);
      return reply;
    },
  );
}
