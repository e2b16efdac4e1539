import { parseArgs } from "node:util";
import { z } from "zod";
import { FetchError } from "./errors.js";

/**
 * The flags of `modelgate runtime fetch`, as data. The CLI wiring (commander)
 * may parse argv itself and hand over the resulting object; `parseFetchArgv`
 * does the same for a plain argv so the command also runs on its own.
 */
export const fetchCommandArgsSchema = z.object({
  source: z.string().min(1, "--source is required"),
  dest: z.string().min(1, "--dest is required"),
  revision: z.string().min(1).optional(),
  /** Repeatable `path=sha256hex`. */
  sha256: z.array(z.string()).default([]),
  /** A sha256sum-format file. */
  checksumsFile: z.string().min(1).optional(),
  endpoint: z.string().min(1).optional(),
  /** Repeatable file name, for an http source without SHA256SUMS. */
  file: z.array(z.string()).default([]),
  /** PEM file with extra trusted CA certificates. */
  caFile: z.string().min(1).optional(),
});

export type FetchCommandArgs = z.input<typeof fetchCommandArgsSchema>;

export const FETCH_FLAGS = {
  source: { type: "string" },
  dest: { type: "string" },
  revision: { type: "string" },
  sha256: { type: "string", multiple: true },
  "checksums-file": { type: "string" },
  endpoint: { type: "string" },
  file: { type: "string", multiple: true },
  "ca-file": { type: "string" },
} as const;

export function parseFetchArgv(argv: readonly string[]): z.output<typeof fetchCommandArgsSchema> {
  let values: Record<string, string | string[] | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: [...argv], options: FETCH_FLAGS, strict: true }));
  } catch (cause) {
    throw new FetchError("invalid_fetch_options", (cause as Error).message, { cause });
  }
  return validateFetchArgs({
    source: values.source,
    dest: values.dest,
    revision: values.revision,
    sha256: values.sha256,
    checksumsFile: values["checksums-file"],
    endpoint: values.endpoint,
    file: values.file,
    caFile: values["ca-file"],
  });
}

export function validateFetchArgs(input: unknown): z.output<typeof fetchCommandArgsSchema> {
  const parsed = fetchCommandArgsSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const flag = issue?.path[0] === undefined ? "" : `--${String(issue.path[0])}: `;
  throw new FetchError("invalid_fetch_options", `${flag}${issue?.message ?? "invalid arguments"}`);
}
