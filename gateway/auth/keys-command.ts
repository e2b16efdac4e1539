import { stringify as stringifyYaml } from "yaml";
import { generateApiKey } from "./key-format.js";
import { KeyEntrySchema, type KeyEntry } from "./keys-file.js";

/**
 * `modelgate keys create`: mints a key, shows it once, and prints the entry to
 * add to the keys file. The key itself is never written anywhere else: the
 * keys file holds only its hash, so whoever loses the printed key makes a new
 * one.
 */

export interface KeysCreateOptions {
  account: string;
  /** Narrow the key to these projects; default: every project of the account. */
  projects?: string[];
  /** Key id; default `key_<16 base62>`. */
  id?: string;
  rateLimit?: { requestsPerMinute: number; burst: number; tokensPerMinute?: number };
  description?: string;
  /** `yaml` (default): the key and a YAML entry, for people. `json`: one JSON line, for scripts. */
  format?: "yaml" | "json";
  /** Where to print; default process.stdout. */
  out?: { write(chunk: string): unknown };
  now?: () => Date;
}

export interface KeysCreateResult {
  id: string;
  hash: string;
  /** The entry printed for the keys file (no secret in it). */
  entry: KeyEntry;
}

export function runKeysCreate(options: KeysCreateOptions): KeysCreateResult {
  const out = options.out ?? process.stdout;
  const generated = generateApiKey(options.id !== undefined ? { id: options.id } : {});
  // Validate with the keys file's own schema, so the printed entry is one the
  // gateway will accept (a bad account id fails here, not at the next reload).
  const entry = KeyEntrySchema.parse({
    id: generated.id,
    hash: generated.hash,
    account: options.account,
    ...(options.projects && options.projects.length > 0 ? { projects: options.projects } : {}),
    ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
    ...(options.description ? { description: options.description } : {}),
    created: (options.now ?? (() => new Date()))().toISOString(),
  });

  if (options.format === "json") {
    out.write(`${JSON.stringify({ key: generated.key, entry })}\n`);
  } else {
    const yaml = stringifyYaml([entry]).trimEnd().replace(/^/gm, "  ");
    out.write(
      [
        `API key ${entry.id} for account ${entry.account}. It is shown only this once; store it now:`,
        "",
        `  ${generated.key}`,
        "",
        "Add this entry under `keys:` in the keys file (it holds the hash, not the key):",
        "",
        yaml,
        "",
      ].join("\n"),
    );
  }
  return { id: entry.id, hash: entry.hash, entry };
}

/**
 * The command-line adapter, for `cli/modelgate.ts`:
 *
 *   keys.command("create")
 *     .requiredOption("--account <id>")
 *     .option("--project <id>", "...", collect, [])
 *     .option("--id <id>").option("--requests-per-minute <n>").option("--burst <n>")
 *     .option("--tokens-per-minute <n>")
 *     .option("--description <text>").option("--format <yaml|json>")
 *     .action(async (flags) => { process.exitCode = await runKeysCreateCommand(flags); });
 *
 * Returns the exit code; errors are printed, not thrown.
 */
export function runKeysCreateCommand(
  flags: Record<string, unknown>,
  io: { out?: { write(chunk: string): unknown }; err?: { write(chunk: string): unknown } } = {},
): Promise<number> {
  const err = io.err ?? process.stderr;
  try {
    const rpm = optionalNumber(flags.requestsPerMinute, "--requests-per-minute");
    const burst = optionalNumber(flags.burst, "--burst");
    const tokens = optionalNumber(flags.tokensPerMinute, "--tokens-per-minute");
    if ((rpm === undefined) !== (burst === undefined)) {
      throw new Error("--requests-per-minute and --burst go together");
    }
    if (tokens !== undefined && rpm === undefined) {
      throw new Error("--tokens-per-minute needs --requests-per-minute and --burst");
    }
    const format = flags.format ?? "yaml";
    if (format !== "yaml" && format !== "json") throw new Error("--format is yaml or json");
    if (typeof flags.account !== "string") throw new Error("--account is required");
    const projects = Array.isArray(flags.project) ? flags.project.map(String) : undefined;
    runKeysCreate({
      account: flags.account,
      format,
      ...(projects ? { projects } : {}),
      ...(typeof flags.id === "string" ? { id: flags.id } : {}),
      ...(rpm !== undefined && burst !== undefined
        ? {
            rateLimit: {
              requestsPerMinute: rpm,
              burst,
              ...(tokens !== undefined ? { tokensPerMinute: tokens } : {}),
            },
          }
        : {}),
      ...(typeof flags.description === "string" ? { description: flags.description } : {}),
      ...(io.out ? { out: io.out } : {}),
    });
    return Promise.resolve(0);
  } catch (error) {
    err.write(`modelgate keys create: ${describe(error)}\n`);
    return Promise.resolve(2);
  }
}

function optionalNumber(value: unknown, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} must be a positive number`);
  return n;
}

function describe(error: unknown): string {
  if (error && typeof error === "object" && "issues" in error && Array.isArray(error.issues)) {
    return (error.issues as { path: PropertyKey[]; message: string }[])
      .map((issue) => `${issue.path.map(String).join(".") || "entry"}: ${issue.message}`)
      .join("; ");
  }
  return (error as Error).message;
}
