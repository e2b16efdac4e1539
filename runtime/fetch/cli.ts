import { readFile } from "node:fs/promises";
import { pino } from "pino";
import { parseChecksumPairs, parseSha256Sums } from "./checksums.js";
import type { Checksums } from "./checksums.js";
import { parseFetchArgv, validateFetchArgs } from "./cli-args.js";
import type { FetchCommandArgs } from "./cli-args.js";
import { FetchError, describeError } from "./errors.js";
import { fetchModel } from "./fetch-model.js";
import type { FetchResult } from "./fetch-model.js";
import type { FetchLogger } from "./progress.js";

export { FETCH_FLAGS, fetchCommandArgsSchema, parseFetchArgv } from "./cli-args.js";
export type { FetchCommandArgs } from "./cli-args.js";

export interface FetchCommandIo {
  /** Where the one-line error goes. */
  stderr?: { write(line: string): unknown };
  logger?: FetchLogger;
  env?: Readonly<Record<string, string | undefined>>;
  signal?: AbortSignal;
  /** Receives the result on success (tests, or a caller that wants the file list). */
  onResult?: (result: FetchResult) => void;
}

/**
 * `modelgate runtime fetch`: argv (or the already-parsed flags) in, exit code
 * out. Progress is logged as JSON lines on stdout; a failure is one line on
 * stderr, `modelgate runtime fetch: <code>: <message>`, and exit code 1.
 */
export async function runFetchCommand(
  input: readonly string[] | FetchCommandArgs,
  io: FetchCommandIo = {},
): Promise<number> {
  const stderr = io.stderr ?? process.stderr;
  try {
    const args = Array.isArray(input) ? parseFetchArgv(input) : validateFetchArgs(input);
    const checksums: Checksums = {
      ...(args.checksumsFile ? await readChecksumsFile(args.checksumsFile) : {}),
      ...parseChecksumPairs(args.sha256),
    };
    const env = io.env ?? process.env;
    const ca = args.caFile ? await readText(args.caFile, "--ca-file") : undefined;
    const result = await fetchModel({
      source: args.source,
      dest: args.dest,
      ...(args.revision === undefined ? {} : { revision: args.revision }),
      ...(args.endpoint === undefined ? {} : { endpoint: args.endpoint }),
      ...(args.file.length === 0 ? {} : { files: args.file }),
      ...(ca === undefined ? {} : { ca }),
      checksums,
      env,
      logger: io.logger ?? pino({ base: { component: "runtime-fetch" } }),
      ...(io.signal === undefined ? {} : { signal: io.signal }),
    });
    io.onResult?.(result);
    return 0;
  } catch (err) {
    stderr.write(`modelgate runtime fetch: ${oneLine(describeError(err))}\n`);
    return 1;
  }
}

async function readChecksumsFile(path: string): Promise<Checksums> {
  return parseSha256Sums(await readText(path, "--checksums-file"), path);
}

async function readText(path: string, flag: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (cause) {
    throw new FetchError("invalid_fetch_options", `${flag} ${path}: cannot read the file`, {
      cause,
    });
  }
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ");
}
