import { createWriteStream, openAsBlob } from "node:fs";
import { basename } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * `modelgate batch submit | watch | results`: an operator's hands on the
 * Files and Batch API, and nothing more. Every step is one documented HTTP
 * call (docs/batch.md), made with the caller's API key; the gateway does
 * all the work, so these commands hold no state of their own.
 */
export interface BatchCliFlags {
  /** The gateway's base URL (MODELGATE_BASE_URL; default http://127.0.0.1:8080). */
  baseUrl?: string;
  /** The API key (MODELGATE_API_KEY; a flag is visible in ps). */
  apiKey?: string;
  /** A project of the key's account (x-project-id). */
  project?: string;
}

interface Connection {
  baseUrl: string;
  headers: Record<string, string>;
}

/** Where the commands' output goes: stdout for results, stderr for progress and messages. */
export interface BatchCliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

const defaultIo = (): BatchCliIo => ({
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
});

/** What the commands read of a Batch object. */
export interface BatchView {
  id: string;
  status: string;
  output_file_id: string | null;
  error_file_id: string | null;
  request_counts: { total: number; completed: number; failed: number } | null;
  errors: { data: Array<{ line: number | null; code: string; message: string }> } | null;
}

export const FINAL_STATUSES: ReadonlySet<string> = new Set([
  "completed",
  "failed",
  "expired",
  "cancelled",
]);

class CliError extends Error {}

function connect(flags: BatchCliFlags, env: NodeJS.ProcessEnv): Connection {
  const apiKey = flags.apiKey ?? env.MODELGATE_API_KEY;
  if (!apiKey) throw new CliError("no API key: set MODELGATE_API_KEY (or --api-key)");
  const baseUrl = (flags.baseUrl ?? env.MODELGATE_BASE_URL ?? "http://127.0.0.1:8080").replace(
    /\/+$/,
    "",
  );
  const headers: Record<string, string> = { "x-api-key": apiKey };
  const project = flags.project ?? env.MODELGATE_PROJECT;
  if (project) headers["x-project-id"] = project;
  return { baseUrl, headers };
}

/** One call; a non-2xx answer becomes an error with the gateway's own message. */
async function call(connection: Connection, path: string, init: RequestInit = {}) {
  const response = await fetch(`${connection.baseUrl}${path}`, {
    ...init,
    headers: { ...connection.headers, ...(init.headers as Record<string, string> | undefined) },
  });
  if (!response.ok) {
    const text = await response.text();
    let message = text.slice(0, 500);
    try {
      const parsed = JSON.parse(text) as { error?: { message?: string; param?: string | null } };
      if (parsed.error?.message) {
        message = parsed.error.message + (parsed.error.param ? ` (${parsed.error.param})` : "");
      }
    } catch {
      // Not the error envelope: the text as it came.
    }
    throw new CliError(`${init.method ?? "GET"} ${path}: ${response.status} ${message}`);
  }
  return response;
}

async function getBatch(connection: Connection, id: string): Promise<BatchView> {
  return (await (
    await call(connection, `/v1/batches/${encodeURIComponent(id)}`)
  ).json()) as BatchView;
}

/** A one-line progress bar of a batch, from its request_counts. Pure. */
export function progressLine(batch: BatchView, width = 30): string {
  const counts = batch.request_counts ?? { total: 0, completed: 0, failed: 0 };
  const done = counts.completed + counts.failed;
  const fraction = counts.total > 0 ? Math.min(1, done / counts.total) : 0;
  const filled = Math.round(fraction * width);
  const bar = `${"#".repeat(filled)}${"-".repeat(width - filled)}`;
  const percent = `${Math.floor(fraction * 100)}%`.padStart(4);
  return `${batch.id} [${bar}] ${percent} ${done}/${counts.total} (completed ${counts.completed}, failed ${counts.failed}) ${batch.status}`;
}

async function run(io: BatchCliIo, name: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (error) {
    const message = error instanceof CliError ? error.message : String(error);
    io.stderr.write(`modelgate batch ${name}: ${message}\n`);
    return 1;
  }
}

/** Uploads the file (streamed from disk), creates the batch, prints its id on stdout. */
export function runBatchSubmit(
  flags: BatchCliFlags & { file: string; metadata?: string[] },
  io: BatchCliIo = defaultIo(),
): Promise<number> {
  return run(io, "submit", async () => {
    const connection = connect(flags, io.env);
    const metadata: Record<string, string> = {};
    for (const pair of flags.metadata ?? []) {
      const at = pair.indexOf("=");
      if (at <= 0) throw new CliError(`--metadata takes key=value, not '${pair}'`);
      metadata[pair.slice(0, at)] = pair.slice(at + 1);
    }
    const form = new FormData();
    form.set("purpose", "batch");
    // A Blob backed by the file: fetch reads it as it sends, never whole.
    form.set("file", await openAsBlob(flags.file), basename(flags.file));
    const file = (await (
      await call(connection, "/v1/files", { method: "POST", body: form })
    ).json()) as { id: string; bytes: number };
    io.stderr.write(`uploaded ${flags.file}: ${file.id} (${file.bytes} bytes)\n`);
    const batch = (await (
      await call(connection, "/v1/batches", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          input_file_id: file.id,
          endpoint: "/v1/responses",
          completion_window: "24h",
          ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
        }),
      })
    ).json()) as BatchView;
    io.stdout.write(`${batch.id}\n`);
    return 0;
  });
}

/**
 * Polls the batch and draws its progress on stderr until a final status:
 * exit 0 when `completed`, 1 otherwise (a failed batch's errors are listed).
 */
export function runBatchWatch(
  flags: BatchCliFlags & { batchId: string; intervalMs?: number },
  io: BatchCliIo = defaultIo(),
): Promise<number> {
  return run(io, "watch", async () => {
    const connection = connect(flags, io.env);
    const tty = io.stderr.isTTY === true;
    let last = "";
    for (;;) {
      const batch = await getBatch(connection, flags.batchId);
      const line = progressLine(batch);
      const final = FINAL_STATUSES.has(batch.status);
      // On a terminal the bar is redrawn in place; in a log, a line per change.
      if (tty) io.stderr.write(`\r${line}${final ? "\n" : ""}`);
      else if (line !== last) io.stderr.write(`${line}\n`);
      last = line;
      if (final) {
        for (const error of batch.errors?.data ?? []) {
          io.stderr.write(`  line ${error.line ?? "-"}: ${error.code}: ${error.message}\n`);
        }
        return batch.status === "completed" ? 0 : 1;
      }
      await sleep(flags.intervalMs ?? 1000);
    }
  });
}

/** Streams a file's content to `to`; stdout is left open. */
async function download(
  connection: Connection,
  fileId: string,
  to: NodeJS.WritableStream,
  end: boolean,
) {
  const response = await call(connection, `/v1/files/${encodeURIComponent(fileId)}/content`);
  if (!response.body) return;
  await pipeline(Readable.fromWeb(response.body), to, { end });
}

/**
 * Writes the output file's lines to --out (default stdout) and the error
 * file's to --errors (without it, only how to get them is said on stderr).
 */
export function runBatchResults(
  flags: BatchCliFlags & { batchId: string; out?: string; errors?: string },
  io: BatchCliIo = defaultIo(),
): Promise<number> {
  return run(io, "results", async () => {
    const connection = connect(flags, io.env);
    const batch = await getBatch(connection, flags.batchId);
    if (!batch.output_file_id && !batch.error_file_id) {
      throw new CliError(`batch ${batch.id} is ${batch.status}: it has no results (yet)`);
    }
    if (batch.output_file_id) {
      await download(
        connection,
        batch.output_file_id,
        flags.out ? createWriteStream(flags.out) : io.stdout,
        flags.out !== undefined,
      );
    }
    if (batch.error_file_id) {
      if (flags.errors) {
        await download(connection, batch.error_file_id, createWriteStream(flags.errors), true);
      } else {
        io.stderr.write(
          `batch ${batch.id} has an error file (${batch.error_file_id}): add --errors <file>\n`,
        );
      }
    }
    const counts = batch.request_counts;
    io.stderr.write(
      `batch ${batch.id}: ${batch.status}, ${counts?.completed ?? 0} completed, ${counts?.failed ?? 0} failed\n`,
    );
    return 0;
  });
}
