import { GetObjectCommand, ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import type { GetObjectCommandOutput } from "@aws-sdk/client-s3";
import { Readable } from "node:stream";
import { FetchError, errorForStatus } from "./errors.js";
import { isTransientNetworkError } from "./http-client.js";
import { emptyBody } from "./source.js";
import type {
  ModelSource,
  OpenedFile,
  SourceContext,
  SourceFile,
  SourceListing,
} from "./source.js";

/**
 * `s3://bucket/prefix`: every object under `prefix/` (or the single object
 * `prefix`). Credentials come from the SDK's default chain unless given; the
 * SDK's own retries are off because the fetch loop retries with resume.
 */
export function createS3Source(bucket: string, prefix: string, ctx: SourceContext): ModelSource {
  const { region, endpoint, credentials } = ctx.s3;
  const client = new S3Client({
    region,
    maxAttempts: 1,
    ...(endpoint === undefined ? {} : { endpoint, forcePathStyle: true }),
    ...(credentials === undefined ? {} : { credentials }),
    ...(ctx.ca === undefined ? {} : { requestHandler: { httpsAgent: { ca: ctx.ca } } }),
  });
  let keyPrefix = prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`;
  const objects = new Map<string, { size: number | undefined; etag: string | undefined }>();
  const where = `s3://${bucket}/${prefix}`;

  return {
    description: where,
    async list(signal): Promise<SourceListing> {
      let files = await listAll(client, bucket, keyPrefix, signal, where);
      if (files.length === 0 && keyPrefix !== prefix) {
        // Not a folder: maybe the URI names one object.
        const single = (await listAll(client, bucket, prefix, signal, where)).find(
          (f) => f.key === prefix,
        );
        if (single) {
          keyPrefix = prefix.slice(0, prefix.lastIndexOf("/") + 1);
          files = [single];
        }
      }
      if (files.length === 0) {
        throw new FetchError("source_not_found", `${where} holds no objects`);
      }
      const listed: SourceFile[] = [];
      for (const f of files) {
        const path = f.key.slice(keyPrefix.length);
        objects.set(path, { size: f.size, etag: f.etag });
        listed.push({ path, size: f.size });
      }
      return { files: listed };
    },
    async open(path, start, signal): Promise<OpenedFile> {
      const known = objects.get(path);
      if (start > 0 && known?.size === start) {
        return { body: emptyBody(), offset: start, size: start };
      }
      const key = keyPrefix + path;
      let output: GetObjectCommandOutput;
      try {
        output = await client.send(
          new GetObjectCommand({
            Bucket: bucket,
            Key: key,
            ...(start > 0 ? { Range: `bytes=${start}-` } : {}),
            // On resume, the partial bytes must belong to the same object version.
            ...(start > 0 && known?.etag ? { IfMatch: known.etag } : {}),
          }),
          { abortSignal: signal },
        );
      } catch (err) {
        if (start > 0 && statusOf(err) === 412) return this.open(path, 0, signal);
        throw s3Error(err, `GET s3://${bucket}/${key}`);
      }
      const ranged = output.$metadata.httpStatusCode === 206;
      const offset = ranged ? start : 0;
      const length = output.ContentLength;
      return {
        body: toAsyncIterable(output.Body),
        offset,
        size: known?.size ?? (length === undefined ? undefined : length + offset),
      };
    },
  };
}

interface S3Object {
  key: string;
  size: number | undefined;
  etag: string | undefined;
}

async function listAll(
  client: S3Client,
  bucket: string,
  prefix: string,
  signal: AbortSignal | undefined,
  where: string,
): Promise<S3Object[]> {
  const found: S3Object[] = [];
  let token: string | undefined;
  do {
    let page;
    try {
      page = await client.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
        { abortSignal: signal },
      );
    } catch (err) {
      throw s3Error(err, `list ${where}`);
    }
    for (const item of page.Contents ?? []) {
      // Zero-byte keys ending in "/" are folder placeholders made by consoles.
      if (!item.Key || item.Key.endsWith("/")) continue;
      found.push({ key: item.Key, size: item.Size, etag: item.ETag });
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return found;
}

function statusOf(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

function s3Error(err: unknown, what: string): FetchError {
  if (err instanceof FetchError) return err;
  const status = statusOf(err);
  const name = err instanceof Error ? err.name : "error";
  if (status !== undefined) {
    const error = errorForStatus(status, what, name);
    return new FetchError(error.code, error.message, {
      status,
      retryable: error.retryable,
      cause: err,
    });
  }
  const reason = err instanceof Error ? err.message : String(err);
  return new FetchError("download_failed", `${what}: ${reason}`, {
    retryable: isTransientNetworkError(err),
    cause: err,
  });
}

function toAsyncIterable(body: GetObjectCommandOutput["Body"]): AsyncIterable<Uint8Array> {
  if (body === undefined) return emptyBody();
  if (body instanceof Readable) return body;
  if (Symbol.asyncIterator in Object(body)) return body as unknown as AsyncIterable<Uint8Array>;
  throw new FetchError("download_failed", "the S3 client returned a body that is not a stream");
}
