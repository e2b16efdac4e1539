import { mkdir, readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { SHA256SUMS_FILE, normaliseChecksums, parseSha256Sums } from "./checksums.js";
import type { Checksums } from "./checksums.js";
import { createSource } from "./create-source.js";
import { downloadFile } from "./download-file.js";
import { FetchError } from "./errors.js";
import { createDispatcher } from "./http-client.js";
import {
  buildMarker,
  markerFilesPresent,
  markerMatchesPlan,
  readMarker,
  writeMarker,
} from "./marker.js";
import type { FetchedFile } from "./marker.js";
import { parseFetchOptions, resolveSettings } from "./options.js";
import type { FetchOptions } from "./options.js";
import { buildPlan } from "./plan.js";
import type { FetchPlan } from "./plan.js";
import { runPool } from "./pool.js";
import { reportSummary } from "./progress.js";
import type { ProgressSink } from "./progress.js";
import { abortedError, withRetry } from "./retry.js";
import type { RetryPolicy } from "./retry.js";
import { MARKER_FILE } from "./safe-path.js";
import type { ModelSource } from "./source.js";
import { describeSource, parseSourceUri } from "./source-uri.js";
import {
  commitStaging,
  dropStagingState,
  prepareStaging,
  pruneStaging,
  stagingFor,
} from "./staging.js";

export { fetchOptionsSchema, parseFetchOptions } from "./options.js";
export type { FetchHooks, FetchOptions, FetchOptionsData } from "./options.js";
export type { FetchLogger, FetchProgressEvent } from "./progress.js";
export { FetchError } from "./errors.js";
export type { FetchErrorCode } from "./errors.js";

export interface FetchResult {
  /** Absolute destination folder. */
  dest: string;
  /** Printable source (no secrets). */
  source: string;
  revision: string | undefined;
  files: FetchedFile[];
  /** Bytes transferred in this run. */
  bytesDownloaded: number;
  /** True when the destination already held this model and nothing was done. */
  alreadyPresent: boolean;
  seconds: number;
}

/**
 * Copies a model from `options.source` into `options.dest`, in numbered steps:
 * 1. parse options and the source URI; 2. list the source; 3. plan (paths
 * checked, checksums layered); 4. return early when dest already holds it;
 * 5. download into `<dest>.partial/` with resume and verification;
 * 6. write the marker and rename staging into place.
 */
export async function fetchModel(options: FetchOptions): Promise<FetchResult> {
  const {
    onProgress,
    logger,
    signal,
    env = process.env,
    now = () => Date.now(),
    ...data
  } = options;
  const started = now();
  const parsed = parseFetchOptions(data);
  const uri = parseSourceUri(parsed.source);
  const settings = resolveSettings(parsed, uri, env);
  const dest = resolve(parsed.dest).replace(/\/+$/, "");
  const ca = parsed.ca ?? (settings.caFile ? await readCaFile(settings.caFile) : undefined);
  const sink: ProgressSink = { onProgress, logger, intervalMs: parsed.progressIntervalMs, now };
  const dispatcher = createDispatcher({ ca, env });

  try {
    const source = createSource(uri, {
      dispatcher,
      endpoint: settings.endpoint,
      hfToken: settings.hfToken,
      revision: parsed.revision,
      files: parsed.files,
      ca,
      s3: {
        region: settings.region,
        endpoint: settings.endpoint,
        credentials: parsed.s3?.credentials,
      },
    });
    const retryHooks = { signal };
    const listing = await withRetry(() => source.list(signal), settings.retry, retryHooks);
    const sums =
      listing.checksums ?? (await readSourceSums(source, listing, settings.retry, signal));
    const plan = buildPlan({
      source: describeSource(uri),
      revision:
        listing.revision ?? (uri.scheme === "hf" ? (parsed.revision ?? uri.revision) : undefined),
      listing,
      sums,
      pinned: normaliseChecksums(parsed.checksums ?? {}, "checksums"),
    });
    logger?.info(
      { source: plan.source, revision: plan.revision, files: plan.files.length, dest },
      `fetching ${plan.files.length} files from ${plan.source} into ${dest}`,
    );

    const existing = await readMarker(dest);
    if (
      existing &&
      markerMatchesPlan(existing, plan) &&
      (await markerFilesPresent(dest, existing))
    ) {
      const seconds = (now() - started) / 1000;
      reportSummary(sink, { files: plan.files.length, bytes: 0, seconds, alreadyPresent: true });
      return {
        dest,
        ...planSummary(plan),
        files: existing.files,
        bytesDownloaded: 0,
        alreadyPresent: true,
        seconds,
      };
    }

    await mkdir(dirname(dest), { recursive: true });
    const staging = stagingFor(dest);
    await prepareStaging(staging, JSON.stringify({ source: plan.source, revision: plan.revision }));
    // One file failing for good stops the others; their bytes stay for a resume.
    const stop = new AbortController();
    const jobSignal = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
    const outcomes = await runPool(
      plan.files,
      parsed.concurrency,
      jobSignal,
      (file) =>
        downloadFile(
          { source, staging, retry: settings.retry, progress: sink, signal: jobSignal },
          file,
        ),
      () => stop.abort(),
    );
    if (signal?.aborted) throw abortedError(signal);

    const files = outcomes.map((o) => o.file);
    await pruneStaging(staging, new Set([...files.map((f) => f.path)]));
    await dropStagingState(staging);
    await writeMarker(staging.dir, buildMarker(plan, files, new Date(now())));
    await commitStaging(staging, dest);

    const bytesDownloaded = outcomes.reduce((sum, o) => sum + o.downloaded, 0);
    const seconds = (now() - started) / 1000;
    reportSummary(sink, {
      files: files.length,
      bytes: bytesDownloaded,
      seconds,
      alreadyPresent: false,
    });
    return { dest, ...planSummary(plan), files, bytesDownloaded, alreadyPresent: false, seconds };
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}

function planSummary(plan: FetchPlan): { source: string; revision: string | undefined } {
  return { source: plan.source, revision: plan.revision };
}

/** A SHA256SUMS the source carries (file, hf and s3 schemes) is read and used. */
async function readSourceSums(
  source: ModelSource,
  listing: { files: { path: string }[] },
  retry: RetryPolicy,
  signal: AbortSignal | undefined,
): Promise<Checksums> {
  if (!listing.files.some((f) => f.path === SHA256SUMS_FILE)) return {};
  const text = await withRetry(
    async () => {
      const opened = await source.open(SHA256SUMS_FILE, 0, signal);
      const chunks: Buffer[] = [];
      for await (const chunk of opened.body) chunks.push(Buffer.from(chunk));
      return Buffer.concat(chunks).toString("utf8");
    },
    retry,
    { signal },
  );
  return parseSha256Sums(text, `${source.description} ${SHA256SUMS_FILE}`);
}

async function readCaFile(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (cause) {
    throw new FetchError(
      "invalid_fetch_options",
      `cannot read CA file ${path} (MODELGATE_FETCH_CA_FILE)`,
      {
        cause,
      },
    );
  }
}

/** Kept for callers that want to know which file name the marker uses. */
export { MARKER_FILE };
