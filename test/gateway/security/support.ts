import { request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http";
import { connect } from "node:net";
import type { RunningRuntime } from "../../runtime/support/runtime-server.js";
import type { Platform } from "../support/platform.js";

/**
 * Helpers the security tests share: a request sent with `node:http` (which,
 * unlike fetch, can repeat a header line and writes header strings as latin1,
 * so a UTF-8 byte sequence such as U+2028 reaches the server unchanged), the
 * counters that prove a refused request went no further, and a search of the
 * gateway's log lines.
 */

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** POST with exact bytes and headers; an array value sends the header line once per item. */
export function rawPost(
  baseUrl: string,
  path: string,
  headers: OutgoingHttpHeaders,
  body: string | Buffer,
): Promise<RawAnswer> {
  const bytes = typeof body === "string" ? Buffer.from(body) : body;
  return new Promise((resolve, reject) => {
    const req = request(
      `${baseUrl}${path}`,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "content-length": String(bytes.length),
          connection: "close",
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(bytes);
  });
}

/**
 * Writes `head` (CRLF-separated header lines, latin1) and `body` on a bare
 * socket and returns the status line: for bytes no HTTP client will send,
 * such as control characters inside a header value.
 */
export function rawExchange(baseUrl: string, head: string, body: string): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1").split("\r\n")[0]!));
    socket.write(
      Buffer.concat([
        Buffer.from(
          `${head}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n`,
          "latin1",
        ),
        Buffer.from(body),
      ]),
    );
  });
}

/** The UTF-8 bytes of `text` as a latin1 string: how `node:http` puts them on the wire unchanged. */
export function utf8OnTheWire(text: string): string {
  return Buffer.from(text, "utf8").toString("latin1");
}

/**
 * Sum of `modelgate_runtime_requests_total` over every status, read from the
 * runtime's registry in-process. Not scraped over HTTP: the runtime counts
 * every response it sends, its own `/metrics` answers included
 * (runtime/app.ts, the onResponse hook), so each scrape would move the count.
 */
export async function runtimeRequests(runtime: RunningRuntime): Promise<number> {
  const metric = await runtime.metrics.requests.get();
  return metric.values.reduce((sum, sample) => sum + sample.value, 0);
}

export interface Footprint {
  providerChecks: number;
  gptRequests: number;
  nliRequests: number;
}

/** What a request leaves behind further down the path: provider checks and runtime requests. */
export async function footprint(p: Platform): Promise<Footprint> {
  return {
    providerChecks: p.provider.ledger.checks.length,
    gptRequests: await runtimeRequests(p.runtimes.gpt),
    nliRequests: await runtimeRequests(p.runtimes.nli),
  };
}

/** The log lines that contain `needle` anywhere (raw text, so JSON escaping cannot hide an ASCII marker). */
export function logLinesContaining(p: Platform, needle: string): string[] {
  return p.logLines.filter((line) => line.includes(needle));
}
