import type { FastifyRequest, RouteHandlerMethod } from "fastify";
import { z } from "zod";
import { batchIdSchema, batchObjectSchema, createBatchRequestSchema } from "../../api/batches.js";
import { batchListQuerySchema, listPageSchema } from "../../api/files.js";
import { HttpErrors } from "../../lib/http/http-errors.js";
import { REQUEST_ID } from "../routes/common-responses.js";
import { linksById, type ResponseSpec, type RouteSpec } from "../routes/route-spec.js";
import { BatchErrors } from "./batch-errors.js";
import { batchObject, createBatch, findBatch, listBatches, requestCancel } from "./batch-store.js";
import { findFile } from "./file-store.js";
import {
  envelope,
  API_KEY_HEADERS,
  FILES_ROUTE_CONFIG,
  managementErrors,
  ownerOf,
} from "./files.routes.js";
import { parseOr400, parseQueryOr400 } from "./parse.js";
import type { StoreCalls } from "../store/store-calls.js";

/**
 * The Batch routes (`/v1/batches`): API-key only. Creating a batch records
 * it as `validating` and returns; the batch workers (batch-worker.ts) do
 * the rest, in whichever gateway replica is free.
 */
const ok = (description: string, schema: z.ZodType): ResponseSpec => ({
  description,
  schema,
  headers: [REQUEST_ID],
});
const notFound: ResponseSpec = {
  ...managementErrors[400]!,
  description: "No such batch (or input file) for this account and project",
};
const batchIdParam = [{ name: "batch_id", description: "The batch's id", schema: batchIdSchema }];

export const BATCH_ROUTES: readonly RouteSpec[] = [
  {
    method: "POST",
    path: "/v1/batches",
    action: "files-and-batches",
    operationId: "createBatch",
    summary: "Create a batch",
    description:
      "Runs the requests of a `batch` file (JSONL: `custom_id`, `method`, `url`, `body`) against `/v1/responses` within 24 hours, at the models' batch prices, outside the per-request rate limits. The batch starts as `validating`: a file with a bad line ends as `failed` with `errors` listing the lines.",
    config: FILES_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    body: { mediaType: "application/json", schema: createBatchRequestSchema },
    responses: {
      200: {
        ...ok("The Batch object", batchObjectSchema),
        links: linksById("batch_id", {
          retrieveBatch: { operationId: "retrieveBatch", description: "The batch" },
          cancelBatch: { operationId: "cancelBatch", description: "Cancel it" },
        }),
      },
      ...managementErrors,
      404: notFound,
    },
  },
  {
    method: "GET",
    path: "/v1/batches",
    action: "files-and-batches",
    operationId: "listBatches",
    summary: "List batches",
    description: "The caller's batches, newest first; cursor pagination with `after`.",
    config: FILES_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    query: batchListQuerySchema,
    responses: {
      200: ok("A page of Batch objects", listPageSchema(batchObjectSchema, "BatchList")),
      ...managementErrors,
      404: envelope("`after` names no batch of this account and project"),
    },
  },
  {
    method: "GET",
    path: "/v1/batches/{batch_id}",
    action: "files-and-batches",
    operationId: "retrieveBatch",
    summary: "Retrieve a batch",
    description: "The Batch object, its `request_counts` as they stand.",
    config: FILES_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    pathParams: batchIdParam,
    responses: {
      200: ok("The Batch object", batchObjectSchema),
      ...managementErrors,
      404: notFound,
    },
  },
  {
    method: "POST",
    path: "/v1/batches/{batch_id}/cancel",
    action: "files-and-batches",
    operationId: "cancelBatch",
    summary: "Cancel a batch",
    description:
      "A `validating` or `in_progress` batch becomes `cancelling`, then `cancelled` with its finished results kept. A finished batch cannot be cancelled (400).",
    config: FILES_ROUTE_CONFIG,
    requestHeaders: API_KEY_HEADERS,
    pathParams: batchIdParam,
    responses: {
      200: ok("The Batch object", batchObjectSchema),
      ...managementErrors,
      404: notFound,
    },
  },
];

const idParams = z.object({ batch_id: z.string() });

export interface BatchRouteOptions {
  /** The completion window, in seconds (`--batch-completion-window`; 24 hours). */
  windowSeconds: number;
}

export function batchHandlers(
  store: StoreCalls,
  now: () => number,
  options: BatchRouteOptions,
): Record<string, RouteHandlerMethod> {
  const batchOf = async (request: FastifyRequest) => {
    const { batch_id } = idParams.parse(request.params);
    const batch = await store.read((db) => findBatch(db, ownerOf(request), batch_id));
    if (!batch) throw BatchErrors.batchNotFound(batch_id);
    return batch;
  };
  return {
    createBatch: async (request) => {
      const body = parseOr400(createBatchRequestSchema, request.body);
      const owner = ownerOf(request);
      const file = await store.read((db) => findFile(db, owner, body.input_file_id));
      if (!file) throw BatchErrors.fileNotFound(body.input_file_id, "input_file_id");
      if (file.purpose !== "batch") {
        throw HttpErrors.invalidRequest(
          `The file ${file.id} was not uploaded with purpose 'batch'.`,
          "input_file_id",
        );
      }
      const createdAt = new Date(now());
      const caller = request.caller;
      // Waited for: a batch given up on could still be created, and the
      // client's retry would run (and bill) it twice.
      return store.write(async (db) => {
        const row = await createBatch(db, {
          owner,
          keyId: caller?.kind === "api-key" ? caller.keyId : "",
          inputFileId: file.id,
          endpoint: body.endpoint,
          completionWindow: body.completion_window,
          metadata: body.metadata ?? null,
          createdAt,
          expiresAt: new Date(createdAt.getTime() + options.windowSeconds * 1000),
          outputExpiresAfterSeconds: body.output_expires_after?.seconds ?? null,
        });
        return batchObject(db, row);
      });
    },
    listBatches: async (request) => {
      const query = parseQueryOr400(batchListQuerySchema, request.query);
      const page = await store.read((db) => listBatches(db, ownerOf(request), query));
      // A cursor that names no batch of the caller's, as a missing batch: 404.
      if (!page) throw BatchErrors.batchNotFound(query.after!, "after");
      return page;
    },
    retrieveBatch: async (request) => {
      const batch = await batchOf(request);
      return store.read((db) => batchObject(db, batch));
    },
    cancelBatch: async (request) => {
      const batch = await batchOf(request);
      const result = await store.write((db) =>
        requestCancel(db, ownerOf(request), batch.id, new Date(now())),
      );
      if (!result) throw BatchErrors.batchNotFound(batch.id);
      if ("notCancellable" in result) throw BatchErrors.batchNotCancellable(result.notCancellable);
      // A 503 here after the cancel landed is safe: the retry finds it `cancelling`.
      return store.read((db) => batchObject(db, result.row));
    },
  };
}
