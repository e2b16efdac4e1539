import { Agent, EnvHttpProxyAgent, interceptors, request } from "undici";
import type { Dispatcher } from "undici";
import { FetchError, errorForStatus } from "./errors.js";
import { redactUri } from "./source-uri.js";
import { emptyBody } from "./source.js";
import type { OpenedFile } from "./source.js";

export interface DispatcherSettings {
  /** Extra trusted CA certificates (PEM), for a private hub or a test server. */
  ca?: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
}

/**
 * One pooled client per fetch. Redirects are followed because the hub answers
 * `resolve/` with a 302 to its CDN; undici drops the Authorization header when
 * a redirect leaves the origin, so the token never reaches the CDN.
 */
export function createDispatcher(settings: DispatcherSettings): Dispatcher {
  const connect = settings.ca === undefined ? {} : { ca: settings.ca };
  const { env } = settings;
  const proxy = env.HTTPS_PROXY ?? env.https_proxy ?? env.HTTP_PROXY ?? env.http_proxy;
  const base =
    proxy === undefined
      ? new Agent({ connect })
      : new EnvHttpProxyAgent({
          httpProxy: env.HTTP_PROXY ?? env.http_proxy,
          httpsProxy: env.HTTPS_PROXY ?? env.https_proxy,
          noProxy: env.NO_PROXY ?? env.no_proxy,
          connect,
        });
  return base.compose(interceptors.redirect({ maxRedirections: 5 }));
}

export interface GetOptions {
  dispatcher: Dispatcher;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** Hint appended to 4xx messages ("set HF_TOKEN", …). */
  hint?: string;
  /** A non-2xx status the caller handles itself. */
  allowStatus?: number;
}

/** GET that resolves only on 2xx; any other status becomes a coded error, body drained. */
export async function getOk(url: URL, options: GetOptions): Promise<Dispatcher.ResponseData> {
  const printable = redactUri(url.toString());
  let response: Dispatcher.ResponseData;
  try {
    response = await request(url, {
      method: "GET",
      dispatcher: options.dispatcher,
      headers: options.headers,
      signal: options.signal,
    });
  } catch (cause) {
    throw networkError(printable, cause);
  }
  const { statusCode } = response;
  if ((statusCode >= 200 && statusCode < 300) || statusCode === options.allowStatus) {
    return response;
  }
  await response.body.dump().catch(() => undefined);
  throw errorForStatus(response.statusCode, `GET ${printable}`, options.hint);
}

export async function getText(url: URL, options: GetOptions): Promise<string> {
  const response = await getOk(url, options);
  try {
    return await response.body.text();
  } catch (cause) {
    throw networkError(redactUri(url.toString()), cause);
  }
}

/**
 * GET of one file from `start`, with the two answers a server may give to a
 * Range request: 206 from the offset, or 200 with the whole file.
 */
export async function getRange(url: URL, start: number, options: GetOptions): Promise<OpenedFile> {
  if (start === 0) return openedFromResponse(await getOk(url, options), 0);
  const headers = { ...options.headers, range: `bytes=${start}-` };
  const response = await getOk(url, { ...options, headers, allowStatus: 416 });
  if (response.statusCode !== 416) return openedFromResponse(response, start);
  await response.body.dump().catch(() => undefined);
  // 416 with `bytes */N` where N is our offset: the partial file was complete.
  const total = parseUnsatisfiedRange(header(response.headers["content-range"]));
  if (total === start) return { body: emptyBody(), offset: start, size: start };
  // Otherwise the partial bytes are not a prefix of this file: start over.
  return openedFromResponse(await getOk(url, options), 0);
}

function openedFromResponse(response: Dispatcher.ResponseData, start: number): OpenedFile {
  const length = numberHeader(response.headers["content-length"]);
  if (response.statusCode === 206) {
    const range = parseContentRange(header(response.headers["content-range"]));
    if (range === undefined || range.start !== start) {
      // A range we did not ask for cannot be appended; treat it as transient.
      response.body.destroy();
      throw new FetchError(
        "download_failed",
        `server answered 206 with Content-Range "${header(response.headers["content-range"]) ?? ""}" for bytes=${start}-`,
        { retryable: true },
      );
    }
    return { body: response.body, offset: start, size: range.total };
  }
  if (response.statusCode === 204) return { body: emptyBody(), offset: 0, size: 0 };
  return { body: response.body, offset: 0, size: length };
}

/** Parses `bytes 100-199/200` (total may be `*`). Pure. */
export function parseContentRange(
  value: string | undefined,
): { start: number; end: number; total: number | undefined } | undefined {
  const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(value?.trim() ?? "");
  if (!match?.[1] || !match[2] || !match[3]) return undefined;
  return {
    start: Number(match[1]),
    end: Number(match[2]),
    total: match[3] === "*" ? undefined : Number(match[3]),
  };
}

// Parses the total of a 416 answer, `bytes */200` in Content-Range. Pure.
export function parseUnsatisfiedRange(value: string | undefined): number | undefined {
  const match = /^bytes \*\/(\d+)$/.exec(value?.trim() ?? "");
  return match?.[1] ? Number(match[1]) : undefined;
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function numberHeader(value: string | string[] | undefined): number | undefined {
  const text = header(value);
  if (text === undefined || !/^\d+$/.test(text)) return undefined;
  return Number(text);
}

function networkError(printable: string, cause: unknown): FetchError {
  if (cause instanceof FetchError) return cause;
  const code = (cause as { code?: string }).code;
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new FetchError(
    "download_failed",
    `GET ${printable}: ${reason}${code ? ` (${code})` : ""}`,
    {
      retryable: isTransientNetworkError(cause),
      cause,
    },
  );
}

const TRANSIENT_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "ERR_STREAM_PREMATURE_CLOSE",
]);

/**
 * A network failure worth another attempt: resets, refusals, timeouts. A
 * certificate or DNS-name error will fail the same way again, so it is not.
 */
export function isTransientNetworkError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && TRANSIENT_CODES.has(code)) return true;
    e = e.cause;
  }
  return false;
}
