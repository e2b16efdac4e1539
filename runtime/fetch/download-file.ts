import { createHash } from "node:crypto";
import type { Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, rename, stat, unlink } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { FetchError, isFetchError } from "./errors.js";
import { isTransientNetworkError } from "./http-client.js";
import type { FetchedFile } from "./marker.js";
import type { PlannedFile } from "./plan.js";
import { FileProgress } from "./progress.js";
import type { ProgressSink } from "./progress.js";
import { withRetry } from "./retry.js";
import type { RetryPolicy } from "./retry.js";
import type { ModelSource } from "./source.js";
import type { Staging } from "./staging.js";

export interface DownloadContext {
  source: ModelSource;
  staging: Staging;
  retry: RetryPolicy;
  progress: ProgressSink;
  signal?: AbortSignal | undefined;
}

export interface DownloadOutcome {
  file: FetchedFile;
  /** Bytes that crossed the network in this run (0 for a file finished earlier). */
  downloaded: number;
}

/**
 * Brings one file into staging, complete and verified. The bytes are hashed
 * as they are written, so a file is read from disk again only when a previous
 * run left part of it behind. A file that fails its checksum is deleted, so
 * the next try fetches it afresh instead of resuming wrong bytes.
 */
export async function downloadFile(
  ctx: DownloadContext,
  file: PlannedFile,
): Promise<DownloadOutcome> {
  const finished = await reuseFinished(ctx.staging.finalPath(file.path), file);
  if (finished) return { file: finished, downloaded: 0 };

  const partial = ctx.staging.partialPath(file.path);
  await mkdir(dirname(partial), { recursive: true });
  const handle = await open(partial, "a");
  const progress = new FileProgress(ctx.progress, file.path);
  let state: { hash: Hash; bytes: number };
  let downloaded = 0;
  try {
    state = await resumeState(handle, partial, file);
    if (state.bytes > 0) {
      ctx.progress.logger?.info(
        { file: file.path, resumeAt: state.bytes },
        `${file.path}: resuming at byte ${state.bytes}`,
      );
    }
    await withRetry(
      async () => {
        try {
          const opened = await ctx.source.open(file.path, state.bytes, ctx.signal);
          if (opened.offset !== state.bytes) {
            // The server ignored Range and sent the whole file: start over.
            await handle.truncate(0);
            state = { hash: createHash("sha256"), bytes: 0 };
          }
          const total = file.size ?? opened.size;
          for await (const chunk of opened.body) {
            await writeAll(handle, chunk);
            state.hash.update(chunk);
            state.bytes += chunk.length;
            downloaded += chunk.length;
            progress.update(state.bytes, total);
          }
          if (total !== undefined && state.bytes < total) {
            throw new FetchError(
              "download_failed",
              `${file.path}: the transfer ended at ${state.bytes} of ${total} bytes`,
              { retryable: true },
            );
          }
        } catch (err) {
          throw inFile(file.path, err);
        }
      },
      ctx.retry,
      {
        signal: ctx.signal,
        onRetry: (err, attempt, delayMs) =>
          ctx.progress.logger?.warn(
            { file: file.path, attempt, delayMs, error: (err as Error).message },
            `${file.path}: attempt ${attempt} failed, retrying in ${delayMs} ms`,
          ),
      },
    );
  } finally {
    await handle.close();
  }

  const sha256 = state.hash.digest("hex");
  const problem = verify(file, state.bytes, sha256);
  if (problem) {
    await unlink(partial).catch(() => undefined);
    throw problem;
  }
  const final = ctx.staging.finalPath(file.path);
  await mkdir(dirname(final), { recursive: true });
  await rename(partial, final);
  progress.finish(state.bytes);
  return { file: { path: file.path, size: state.bytes, sha256 }, downloaded };
}

/** Size and digest checks against what the plan expects. Pure. */
export function verify(file: PlannedFile, size: number, sha256: string): FetchError | undefined {
  if (file.size !== undefined && size !== file.size) {
    return new FetchError(
      "size_mismatch",
      `${file.path}: expected ${file.size} bytes, got ${size}; the file was deleted`,
    );
  }
  if (file.sha256 !== undefined && sha256 !== file.sha256) {
    return new FetchError(
      "checksum_mismatch",
      `${file.path}: sha256 mismatch, expected ${file.sha256}, got ${sha256}; the file was deleted`,
    );
  }
  return undefined;
}

/** A file a previous run finished is kept if it still checks out. */
async function reuseFinished(path: string, file: PlannedFile): Promise<FetchedFile | undefined> {
  const info = await stat(path).catch(() => undefined);
  if (!info?.isFile()) return undefined;
  const { hash, bytes } = await hashPrefix(path, info.size);
  const sha256 = hash.digest("hex");
  if (verify(file, bytes, sha256)) {
    await unlink(path);
    return undefined;
  }
  return { path: file.path, size: bytes, sha256 };
}

async function resumeState(
  handle: FileHandle,
  partial: string,
  file: PlannedFile,
): Promise<{ hash: Hash; bytes: number }> {
  const { size } = await handle.stat();
  if (size === 0 || (file.size !== undefined && size > file.size)) {
    if (size > 0) await handle.truncate(0);
    return { hash: createHash("sha256"), bytes: 0 };
  }
  return hashPrefix(partial, size);
}

async function hashPrefix(path: string, size: number): Promise<{ hash: Hash; bytes: number }> {
  const hash = createHash("sha256");
  let bytes = 0;
  if (size > 0) {
    for await (const chunk of createReadStream(path, { end: size - 1, highWaterMark: 1 << 20 })) {
      hash.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
    }
  }
  return { hash, bytes };
}

async function writeAll(handle: FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.length - offset);
    offset += bytesWritten;
  }
}

/** Names the file in any error, and judges bare errors (socket resets) for retry. */
function inFile(path: string, err: unknown): FetchError {
  if (isFetchError(err)) {
    return err.message.includes(path)
      ? err
      : new FetchError(err.code, `${path}: ${err.message}`, {
          status: err.status,
          retryable: err.retryable,
          cause: err.cause,
        });
  }
  const code = (err as { code?: string }).code;
  const reason = err instanceof Error ? err.message : String(err);
  return new FetchError("download_failed", `${path}: ${reason}${code ? ` (${code})` : ""}`, {
    retryable: isTransientNetworkError(err),
    cause: err,
  });
}
