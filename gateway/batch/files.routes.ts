import { Readable } from "node:stream";
import { finished } from "node:stream/promises";
import type { FastifyReply, FastifyRequest, RouteHandlerMethod } from "fastify";
import type { Kysely } from "kysely";
import { z } from "zod";
import { errorEnvelopeSchema } from "../../api/error-envelope.js";
import { paramMessages } from "../../api/param-messages.js";
import {
  fileDeletedSchema,
  fileIdSchema,
  fileListQuerySchema,
  fileListSchema,
  fileObjectSchema,
  fileUploadFormSchema,
  MAX_BATCH_LINES,
  MAX_FILE_BYTES,
  UPLOAD_PURPOSES,
  type FilePurpose,
} from "../../api/files.js";
import { isCodedError, type CodedError } from "../../lib/coded-error.js";
import { errorText } from "../../lib/error-text.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { API_KEY_HEADER, REQUEST_ID } from "../routes/common-responses.js";
import type { GatewayRouteConfig } from "../routes/route-config.js";
import {
  linksById,
  type HeaderSpec,
  type ResponseSpec,
  type RouteSpec,
} from "../routes/route-spec.js";
import type { Database } from "../store/database.js";
import { isStoreUnreachable } from "../store/store-unreachable.js";
import { BatchErrors } from "./batch-errors.js";
import {
  ChunkBuffer,
  deleteFile,
  fileContent,
  fileObjectOf,
  findFile,
  listFiles,
  FileWriter,
} from "./file-store.js";
import type { Owner } from "./owner.js";
import { uploadExpiry, type ExpiresAfterFields } from "./file-expiry.js";
import { parseQueryOr400 } from "./parse.js";
import type { StoreCalls } from "../store/store-calls.js";

/**
 * The Files routes (`/v1/files`): API-key only, owned by the caller's account
 * and project. Management calls, not inference: no per-request rate limit
 * and nothing metered.
 */
export const FILES_ROUTE_CONFIG: GatewayRouteConfig = Object.freeze({
  auth: "api-key",
  rateLimit: "none",
  metering: "none",
  modelRoute: null,
  metricsName: null,
  errorBody: "envelope",
});

/** An upload's body may take `--upload-timeout` to arrive, not the request timeout. */
const FILE_UPLOAD_ROUTE_CONFIG: GatewayRouteConfig = Object.freeze({
  ...FILES_ROUTE_CONFIG,
  bodyTimeout: "upload",
});

export const API_KEY_HEADERS: HeaderSpec[] = [
  API_KEY_HEADER,
  {
    name: "x-project-id",
    required: false,
    description: "A project of the key's account: files and batches belong to it.",
  },
  REQUEST_ID,
];

export const envelope = (description: string): ResponseSpec => ({
  description,
  schema: errorEnvelopeSchema,
  headers: [REQUEST_ID],
});

export const managementErrors: Record<number, ResponseSpec> = {
  400: envelope("A missing or invalid parameter (`error.param` names it)"),
  401: envelope("Missing, malformed, unknown or revoked API key"),
  403: envelope("The key's account may not use the project in x-project-id"),
  503: envelope("The store is unavailable; retry"),
};

const notFound = envelope("No such object for this account and project");
const ok = (description: string, schema: z.ZodType): ResponseSpec => ({
  description,
  schema,
  headers: [REQUEST_ID],
});
const fileIdParam = [{ name: "file_id", description: "The file's id", schema: fileIdSchema }];

export const FILE_ROUTES: readonly RouteSpec[] = [
  {
    method: "POST",
    path: "/v1/files",
    action: "files-and-batches",
    operationId: "createFile",
    summary: "Upload a file",
    description: `Uploads a file (multipart form: \`file\`, \`purpose\`), streamed to the store. At most ${MAX_FILE_BYTES} bytes (413), and ${MAX_BATCH_LINES} lines for purpose \`batch\` (400).`,
    config: FILE_UPLOAD_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    body: { mediaType: "multipart/form-data", schema: fileUploadFormSchema },
    responses: {
      200: {
        ...ok("The File object", fileObjectSchema),
        links: {
          ...linksById("file_id", {
            retrieveFile: { operationId: "retrieveFile", description: "The file" },
            retrieveFileContent: { operationId: "retrieveFileContent", description: "Its content" },
            deleteFile: { operationId: "deleteFile", description: "Delete it" },
          }),
          // A stateful fuzzer otherwise never names a file that exists, and
          // never gets a batch past its input_file_id check.
          createBatch: {
            operationId: "createBatch",
            description: "A batch of its requests",
            requestBody: { input_file_id: "$response.body#/id" },
          },
        },
      },
      ...managementErrors,
      413: envelope("The file is over 200 MB"),
    },
  },
  {
    method: "GET",
    path: "/v1/files",
    action: "files-and-batches",
    operationId: "listFiles",
    summary: "List files",
    description:
      "The caller's files, newest first unless `order=asc`; cursor pagination with `after`.",
    config: FILES_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    query: fileListQuerySchema,
    responses: {
      200: ok("A page of File objects", fileListSchema),
      ...managementErrors,
      404: envelope(
        "`after` names no file of this account and project (one deleted or expired within a day still counts)",
      ),
    },
  },
  {
    method: "GET",
    path: "/v1/files/{file_id}",
    action: "files-and-batches",
    operationId: "retrieveFile",
    summary: "Retrieve a file",
    description: "The File object.",
    config: FILES_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    pathParams: fileIdParam,
    responses: { 200: ok("The File object", fileObjectSchema), ...managementErrors, 404: notFound },
  },
  {
    method: "DELETE",
    path: "/v1/files/{file_id}",
    action: "files-and-batches",
    operationId: "deleteFile",
    summary: "Delete a file",
    description: "Deletes the file and its content.",
    config: FILES_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    pathParams: fileIdParam,
    responses: { 200: ok("Deleted", fileDeletedSchema), ...managementErrors, 404: notFound },
  },
  {
    method: "GET",
    path: "/v1/files/{file_id}/content",
    action: "files-and-batches",
    operationId: "retrieveFileContent",
    summary: "Retrieve a file's content",
    description: "The file's bytes as uploaded (or as a batch wrote them), streamed.",
    config: FILES_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    pathParams: fileIdParam,
    responses: {
      200: { description: "The file's bytes (`application/octet-stream`)", headers: [REQUEST_ID] },
      ...managementErrors,
      404: notFound,
    },
  },
];

export function ownerOf(request: FastifyRequest): Owner {
  const caller = request.caller;
  if (caller?.kind !== "api-key") throw new Error("a Files or Batch route without an API key");
  return { account: caller.account, project: caller.project };
}

const idParams = z.object({ file_id: z.string() });

const FILENAME_MAX = 255;
const NEWLINE = 0x0a;

/** Space, tab, CR, vertical tab, form feed: what makes a line blank. */
const isBlankByte = (byte: number) => byte === 0x20 || (byte >= 0x09 && byte <= 0x0d);

/**
 * Counts an upload's requests as the bytes arrive: the lines with anything
 * but white space in them. Validation skips blank lines, so the upload's
 * 50,000 limit must too: a file of 50,000 requests and a blank line at its
 * end (an editor's, or `"\n".join(...) + "\n\n"`) was refused as 50,001.
 */
export class RequestLineCounter {
  lines = 0;
  private filled = false;

  push(data: Uint8Array): void {
    let start = 0;
    for (;;) {
      const newline = data.indexOf(NEWLINE, start);
      const end = newline === -1 ? data.length : newline;
      // A request line's first byte is "{": the scan ends at once but for blank runs.
      for (let i = start; !this.filled && i < end; i++) this.filled = !isBlankByte(data[i]!);
      if (newline === -1) return;
      if (this.filled) this.lines++;
      this.filled = false;
      start = newline + 1;
    }
  }

  /** The count once the last byte is in: a last line without a line break counts too. */
  end(): number {
    if (this.filled) this.lines++;
    this.filled = false;
    return this.lines;
  }
}

/**
 * POST /v1/files: the file part is written to the store chunk by chunk as
 * it arrives, its bytes and lines counted on the way; over a limit the
 * upload is refused and what was written of it deleted.
 */
/** The upload limits; smaller ones only in tests. */
export interface FileLimits {
  bytes: number;
  batchLines: number;
}

export const FILE_LIMITS: FileLimits = { bytes: MAX_FILE_BYTES, batchLines: MAX_BATCH_LINES };

/**
 * The form as the client sent it: a body that is not a well-formed
 * multipart form (no boundary, a malformed part, cut short) is the
 * client's error, a 400 naming `file`, not ours. Only reading the form is
 * wrapped, so a store that fails while the parts are written stays a 503.
 */
async function* formRead<T>(source: AsyncIterable<T>): AsyncGenerator<T> {
  const iterator = source[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<T>;
    try {
      next = await iterator.next();
    } catch (error) {
      if (isCodedError(error)) throw error;
      throw Object.assign(
        HttpErrors.invalidRequest(
          `The multipart form could not be read: ${errorText(error)}.`,
          "file",
        ),
        { cause: error },
      );
    }
    if (next.done) return;
    yield next.value;
  }
}

/**
 * Reads and drops what is left of a refused upload's body. The form is read
 * no further than the refusal, so without this the body would stall unread,
 * and a client that sends its whole body before it reads the answer (the
 * Python client's httpx) would see the 400 only when the keep-alive timeout
 * closed the connection, 65 s on, or a reset instead.
 */
async function dropRestOfBody(request: FastifyRequest): Promise<void> {
  const raw = request.raw;
  if (raw.readableEnded || raw.destroyed) return;
  raw.unpipe();
  raw.resume();
  // A client that hangs up ends the wait too; the upload timeout bounds a slow one.
  await finished(raw).catch(() => undefined);
}

/** The form's fields besides the file, as `fileUploadFormSchema` lists them. */
const UPLOAD_FIELDS: ReadonlySet<string> = new Set(
  Object.keys(fileUploadFormSchema.shape).filter((name) => name !== "file"),
);

async function upload(
  store: StoreCalls,
  now: () => number,
  limits: FileLimits,
  request: FastifyRequest,
): Promise<unknown> {
  if (!request.isMultipart()) {
    throw HttpErrors.invalidRequest(
      "The body must be multipart/form-data with the fields 'file' and 'purpose'.",
      "file",
    );
  }
  const owner = ownerOf(request);
  // Refused at once while the store is known down, before any of the body is read.
  const db = await store.read((db) => Promise.resolve(db));
  const createdAt = new Date(now());
  let purpose: FilePurpose | undefined;
  const expiresAfter: ExpiresAfterFields = {};
  const seen = new Set<string>();
  let writer: FileWriter | undefined;
  const counter = new RequestLineCounter();
  let refusal: CodedError | undefined;
  try {
    for await (const part of formRead(request.parts())) {
      if (part.type === "field") {
        // A part without a filename is read as a text field; for 'file'
        // that is a file sent the wrong way, not an unknown field.
        if (part.fieldname === "file") {
          throw HttpErrors.invalidRequest(
            '\'file\' must be a file: a part with a filename (Content-Disposition: form-data; name="file"; filename="..."), not a text field.',
            "file",
          );
        }
        // A field the form does not have is refused, naming it, as the
        // document's FileUpload (additionalProperties: false) says and as
        // OpenAI refuses an unrecognized argument. Ignored, it was a 200 for a
        // request outside the document, and a misspelt expires_after field
        // left a file kept for thirty days with no word of why.
        if (!UPLOAD_FIELDS.has(part.fieldname)) {
          throw HttpErrors.invalidRequest(
            `Unrecognized field '${part.fieldname}': an upload takes 'file', 'purpose', 'expires_after[anchor]' and 'expires_after[seconds]'.`,
            part.fieldname,
          );
        }
        // Each field is one value (the FileUpload schema): a second one is
        // refused rather than silently winning over the first.
        if (seen.has(part.fieldname)) {
          throw HttpErrors.invalidRequest(
            `Field '${part.fieldname}' was sent more than once: an upload takes one value of each.`,
            part.fieldname,
          );
        }
        seen.add(part.fieldname);
        if (part.fieldname === "expires_after[anchor]") expiresAfter.anchor = String(part.value);
        if (part.fieldname === "expires_after[seconds]") expiresAfter.seconds = String(part.value);
        if (part.fieldname !== "purpose") continue;
        const value = String(part.value);
        if (!(UPLOAD_PURPOSES as readonly string[]).includes(value)) {
          throw HttpErrors.invalidRequest(
            `Invalid 'purpose': must be one of ${UPLOAD_PURPOSES.join(", ")}.`,
            "purpose",
          );
        }
        purpose = value as FilePurpose;
        continue;
      }
      if (part.fieldname !== "file" || writer) {
        throw HttpErrors.invalidRequest("Send exactly one file, in the field 'file'.", "file");
      }
      // Until `finish` the file is `uploading`: no caller sees it, and it is
      // discarded below or swept, so its rows are written under the read
      // deadline. A late write to a file already discarded lands nowhere.
      const file = {
        owner,
        purpose: purpose ?? "user_data",
        filename: (part.filename || "file").slice(0, FILENAME_MAX),
        createdAt,
        expiresAt: null,
      };
      writer = await store.read(() => FileWriter.open(db, file));
      const opened = writer;
      const buffer = new ChunkBuffer({ write: (data) => store.read(() => opened.write(data)) });
      let bytes = 0;
      for await (const data of formRead(part.file as AsyncIterable<Buffer>)) {
        // Once refused, the rest is read and dropped: a client still sending
        // its body would not read an answer sent before the body ends.
        if (refusal) continue;
        bytes += data.length;
        counter.push(data);
        if (bytes > limits.bytes) refusal = BatchErrors.fileTooLarge(limits.bytes);
        else if (purpose === "batch" && counter.lines > limits.batchLines) {
          refusal = BatchErrors.tooManyLines(limits.batchLines);
        } else await buffer.push(data);
      }
      if (!refusal) await buffer.flush();
    }
    if (refusal) throw refusal;
    if (!writer) throw HttpErrors.invalidRequest(paramMessages.missing("file"), "file");
    if (!purpose) throw HttpErrors.invalidRequest(paramMessages.missing("purpose"), "purpose");
    const lines = counter.end();
    if (purpose === "batch" && lines > limits.batchLines) {
      throw BatchErrors.tooManyLines(limits.batchLines);
    }
    // The purpose and the expiry may come after the file: set once the form is read.
    const expiresAt = uploadExpiry(purpose, expiresAfter, createdAt);
    const complete = writer;
    // `finish` makes the file visible: given up on, it could land after the
    // 503 and the client's retry make a second file. Waited for.
    const row = await store.write(async () => {
      await db
        .updateTable("files")
        .set({ purpose, expires_at: expiresAt })
        .where("id", "=", complete.id)
        .execute();
      return complete.finish(lines);
    });
    return fileObjectOf(row);
  } catch (error) {
    const discarded = writer
      ?.discard()
      .catch((discardError: unknown) =>
        request.log.error(
          { err: discardError, file: writer?.id },
          "could not delete a refused upload",
        ),
      );
    // A store that does not answer would hold the 503 for the pool's
    // timeout: the discard goes on without the answer, and what it cannot
    // delete stays `uploading`, swept after an hour.
    if (!isStoreUnreachable(error)) await discarded;
    await dropRestOfBody(request);
    throw error;
  }
}

export function fileHandlers(
  store: StoreCalls,
  now: () => number,
  limits: FileLimits = FILE_LIMITS,
): Record<string, RouteHandlerMethod> {
  const fileOf = async (request: FastifyRequest) => {
    const { file_id } = idParams.parse(request.params);
    const file = await store.read((db) => findFile(db, ownerOf(request), file_id));
    if (!file) throw BatchErrors.fileNotFound(file_id, "file_id");
    return file;
  };
  return {
    createFile: (request) => upload(store, now, limits, request),
    listFiles: async (request) => {
      const query = parseQueryOr400(fileListQuerySchema, request.query);
      const page = await store.read((db) => listFiles(db, ownerOf(request), query));
      // A cursor that names no file of the caller's, as a missing file: 404.
      if (!page) throw BatchErrors.fileNotFound(query.after!, "after");
      return page;
    },
    retrieveFile: async (request) => fileObjectOf(await fileOf(request)),
    deleteFile: async (request) => {
      const file = await fileOf(request);
      // Waited for: a delete given up on could land after the 503, and the
      // client's retry would be a 404 for a file it did delete.
      if (!(await store.write((db) => deleteFile(db, ownerOf(request), file.id)))) {
        throw BatchErrors.fileNotFound(file.id, "file_id");
      }
      return { id: file.id, object: "file", deleted: true };
    },
    retrieveFileContent: async (request, reply: FastifyReply) => {
      const file = await fileOf(request);
      const content = await readAhead(store, (db) => fileContent(db, file.id));
      reply.type("application/octet-stream");
      reply.header("content-length", String(Number(file.bytes)));
      return reply.send(Readable.from(content));
    },
  };
}

/**
 * A stream of the store's chunks, each pulled as a read (refused while the
 * store is known down, given up after the read deadline), the first one
 * before it is returned: a store that does not answer before the headers
 * go out is a 503 like any read. After that the status is sent; a store that
 * stops answering mid-stream ends the response short of its Content-Length
 * (the client sees a truncated body and retries) within the deadline rather
 * than the pool's query timeout.
 */
async function readAhead<T>(
  store: StoreCalls,
  open: (db: Kysely<Database>) => AsyncGenerator<T, void, undefined>,
): Promise<AsyncGenerator<T, void, undefined>> {
  const source = await store.read((db) => Promise.resolve(open(db)));
  const first = await store.read(() => source.next());
  return (async function* () {
    try {
      for (let next = first; !next.done; next = await store.read(() => source.next())) {
        yield next.value;
      }
    } finally {
      // A client gone, or a chunk given up on: the source queries no further.
      void source.return().catch(() => undefined);
    }
  })();
}
