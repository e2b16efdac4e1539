import { createServer } from "node:http";
import type { ServerResponse } from "node:http";
import type { Tree } from "./helpers.js";
import { sha256 } from "./helpers.js";
import type { Override, RecordedRequest } from "./model-server.js";
import { listen, serveBytes } from "./model-server.js";

export interface S3StandInOptions {
  /** bucket → key → bytes */
  buckets: Record<string, Tree>;
  /** Keys per ListObjectsV2 page, small so tests exercise continuation tokens. */
  pageSize?: number;
  override?: Override;
}

export interface S3StandIn {
  endpoint: string;
  requests: (RecordedRequest & { query: Record<string, string> })[];
}

/**
 * Just enough of S3, path-style, on 127.0.0.1: ListObjectsV2 with
 * continuation tokens, GetObject with Range and If-Match, and S3's XML
 * errors. Requests are signed by the SDK; signatures are not checked.
 */
export async function startS3StandIn(options: S3StandInOptions): Promise<S3StandIn> {
  const requests: S3StandIn["requests"] = [];
  const counts = new Map<string, number>();
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://s3");
    const query = Object.fromEntries(url.searchParams);
    requests.push({
      method: req.method ?? "GET",
      path: url.pathname,
      range: req.headers.range,
      authorization: req.headers.authorization,
      query,
    });
    const count = (counts.get(url.pathname) ?? 0) + 1;
    counts.set(url.pathname, count);
    void (async () => {
      if (options.override && (await options.override(req, res, url.pathname, count))) return;
      const [bucketName = "", ...keyParts] = url.pathname.slice(1).split("/");
      const bucket = options.buckets[decodeURIComponent(bucketName)];
      if (!bucket) return s3Error(res, 404, "NoSuchBucket", "The specified bucket does not exist");
      const key = keyParts.map(decodeURIComponent).join("/");
      if (key === "" && query["list-type"] === "2") {
        return listObjects(res, bucketName, bucket, query, options.pageSize ?? 2);
      }
      const data = bucket[key];
      if (!data) return s3Error(res, 404, "NoSuchKey", "The specified key does not exist.");
      const ifMatch = req.headers["if-match"];
      if (ifMatch !== undefined && ifMatch !== etag(data)) {
        return s3Error(res, 412, "PreconditionFailed", "At least one precondition failed");
      }
      res.setHeader("etag", etag(data));
      serveBytes(req, res, data, true);
    })();
  });
  return { endpoint: await listen(server, "http"), requests };
}

function listObjects(
  res: ServerResponse,
  bucketName: string,
  bucket: Tree,
  query: Record<string, string>,
  pageSize: number,
): void {
  const prefix = query.prefix ?? "";
  const keys = Object.keys(bucket)
    .filter((k) => k.startsWith(prefix))
    .sort();
  // The token is the index of the next key: opaque to the client, simple here.
  const start = query["continuation-token"] ? Number(query["continuation-token"]) : 0;
  const page = keys.slice(start, start + pageSize);
  const truncated = start + pageSize < keys.length;
  const contents = page
    .map((key) => {
      const data = bucket[key] ?? Buffer.alloc(0);
      return (
        `<Contents><Key>${xml(key)}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>` +
        `<ETag>${xml(etag(data))}</ETag><Size>${data.length}</Size><StorageClass>STANDARD</StorageClass></Contents>`
      );
    })
    .join("");
  const body =
    `<?xml version="1.0" encoding="UTF-8"?>` +
    `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
    `<Name>${xml(bucketName)}</Name><Prefix>${xml(prefix)}</Prefix>` +
    `<KeyCount>${page.length}</KeyCount><MaxKeys>${pageSize}</MaxKeys>` +
    `<IsTruncated>${truncated}</IsTruncated>${contents}` +
    (query["continuation-token"]
      ? `<ContinuationToken>${xml(query["continuation-token"])}</ContinuationToken>`
      : "") +
    (truncated ? `<NextContinuationToken>${start + pageSize}</NextContinuationToken>` : "") +
    `</ListBucketResult>`;
  res.writeHead(200, { "content-type": "application/xml" }).end(body);
}

export function s3Error(res: ServerResponse, status: number, code: string, message: string): void {
  res
    .writeHead(status, { "content-type": "application/xml" })
    .end(
      `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${xml(message)}</Message>` +
        `<RequestId>stand-in</RequestId></Error>`,
    );
}

function etag(data: Buffer): string {
  return `"${sha256(data).slice(0, 32)}"`;
}

function xml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}
