import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { RateLimitsSchema, type RateLimits } from "../rate-limit/limits.js";

/**
 * The keys file: accounts, the projects each may use, and the API keys that
 * act for them, stored as hashes. YAML or JSON (JSON is YAML). In a cluster it
 * is a mounted Secret; see docs/api-keys.md.
 */

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const HASH_PATTERN = /^sha256:[0-9a-fA-F]{64}$/;

const Id = z
  .string()
  .regex(ID_PATTERN, "must be 1-128 of A-Z a-z 0-9 _ . : - (not starting with a sign)");

const AccountSchema = z
  .object({
    id: Id,
    projects: z.array(Id).default([]),
    /**
     * Limits of a project, shared by every key of the account that names it
     * in x-project-id (on top of each key's own). A project without one has
     * no limit of its own.
     */
    projectRateLimits: z.record(Id, RateLimitsSchema).optional(),
    description: z.string().optional(),
  })
  .strict();

export const KeyEntrySchema = z
  .object({
    id: Id,
    hash: z.string().regex(HASH_PATTERN, "must be sha256:<64 hex digits> (never the key itself)"),
    account: Id,
    /** Projects this key may name in x-project-id; default: all its account's. */
    projects: z.array(Id).optional(),
    revoked: z.boolean().optional(),
    /**
     * `admin`: the key also reads every account's usage (the usage and cost
     * endpoints); default `member`, its own account's only.
     */
    role: z.enum(["member", "admin"]).optional(),
    rateLimit: RateLimitsSchema.optional(),
    description: z.string().optional(),
    created: z.string().optional(),
  })
  .strict();

export const KeysFileSchema = z
  .object({
    accounts: z.array(AccountSchema).default([]),
    keys: z.array(KeyEntrySchema).default([]),
  })
  .strict();

export type KeysFile = z.infer<typeof KeysFileSchema>;
export type KeyEntry = z.infer<typeof KeyEntrySchema>;

/** What a request learns about the key that authenticated it. Safe to log. */
export interface AuthenticatedKey {
  readonly id: string;
  readonly account: string;
  readonly projects: readonly string[];
  /** Reads every account's usage, not only its own. */
  readonly admin: boolean;
  readonly rateLimit?: RateLimits;
  /** The account's per-project limits, by project id. */
  readonly projectRateLimits?: ReadonlyMap<string, RateLimits>;
}

export interface StoredKey {
  /** Built once per load, so a request allocates nothing to learn its key. */
  readonly key: AuthenticatedKey;
  /** Raw sha256 digest (32 bytes), compared in constant time. */
  readonly digest: Buffer;
  readonly revoked: boolean;
}

/** The compiled, immutable view a KeyStore answers from; swapped whole on reload. */
export interface KeySnapshot {
  readonly byHash: ReadonlyMap<string, StoredKey>;
  readonly keyCount: number;
  readonly accountCount: number;
}

export class KeysFileError extends Error {
  readonly issues: readonly string[];
  constructor(source: string, issues: readonly string[]) {
    super(`invalid keys file ${source}:\n  - ${issues.join("\n  - ")}`);
    this.name = "KeysFileError";
    this.issues = issues;
  }
}

/** Parses and validates the text of a keys file; throws KeysFileError naming each bad entry. */
export function parseKeysFile(text: string, source = "keys file"): KeySnapshot {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new KeysFileError(source, [`not valid YAML or JSON: ${yamlErrorSummary(error)}`]);
  }
  if (raw === null || raw === undefined) throw new KeysFileError(source, ["the file is empty"]);
  const parsed = KeysFileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new KeysFileError(
      source,
      parsed.error.issues.map((issue) => `${describePath(raw, issue.path)}: ${issue.message}`),
    );
  }
  return compileKeysFile(parsed.data, source);
}

/** Cross-entry checks the schema cannot express, then the lookup table. */
export function compileKeysFile(file: KeysFile, source = "keys file"): KeySnapshot {
  const issues: string[] = [];
  const accounts = new Map<string, ReadonlySet<string>>();
  const projectLimits = new Map<string, ReadonlyMap<string, RateLimits>>();
  file.accounts.forEach((account, index) => {
    const name = `accounts[${index}] "${account.id}"`;
    if (accounts.has(account.id)) issues.push(`${name}: duplicate id`);
    else accounts.set(account.id, new Set(account.projects));
    const limits = Object.entries(account.projectRateLimits ?? {});
    const unlisted = limits.filter(([project]) => !account.projects.includes(project));
    if (unlisted.length > 0) {
      issues.push(
        `${name}.projectRateLimits: ${unlisted.map(([p]) => `"${p}"`).join(", ")} not in the account's projects`,
      );
    }
    if (limits.length > 0 && !projectLimits.has(account.id)) {
      projectLimits.set(
        account.id,
        new Map(limits.map(([project, limit]) => [project, Object.freeze({ ...limit })])),
      );
    }
  });

  const ids = new Set<string>();
  const byHash = new Map<string, StoredKey>();
  file.keys.forEach((entry, index) => {
    const name = `keys[${index}] "${entry.id}"`;
    if (ids.has(entry.id)) issues.push(`${name}: duplicate id`);
    ids.add(entry.id);
    const hex = entry.hash.slice("sha256:".length).toLowerCase();
    const twin = byHash.get(hex);
    if (twin) issues.push(`${name}: same hash as key "${twin.key.id}"`);
    const allowed = accounts.get(entry.account);
    if (!allowed) {
      issues.push(`${name}: account "${entry.account}" is not listed in accounts`);
      return;
    }
    const outside = (entry.projects ?? []).filter((project) => !allowed.has(project));
    if (outside.length > 0) {
      issues.push(
        `${name}: projects ${outside.map((p) => `"${p}"`).join(", ")} are not projects of account "${entry.account}"`,
      );
    }
    const key: AuthenticatedKey = Object.freeze({
      id: entry.id,
      account: entry.account,
      projects: Object.freeze([...(entry.projects ?? allowed)]),
      admin: entry.role === "admin",
      ...(entry.rateLimit ? { rateLimit: Object.freeze({ ...entry.rateLimit }) } : {}),
      ...(projectLimits.has(entry.account)
        ? { projectRateLimits: projectLimits.get(entry.account)! }
        : {}),
    });
    byHash.set(hex, {
      key,
      digest: Buffer.from(hex, "hex"),
      revoked: entry.revoked === true,
    });
  });
  if (issues.length > 0) throw new KeysFileError(source, issues);
  return { byHash, keyCount: file.keys.length, accountCount: file.accounts.length };
}

/** `keys[3] "key_abc".rateLimit.burst`: the index and, when it has one, the entry's id. */
function describePath(raw: unknown, path: readonly PropertyKey[]): string {
  if (path.length === 0) return "(top level)";
  let out = "";
  let node: unknown = raw;
  for (const part of path) {
    node =
      isRecord(node) || Array.isArray(node)
        ? (node as Record<PropertyKey, unknown>)[part]
        : undefined;
    if (typeof part === "number") {
      out += `[${part}]`;
      if (isRecord(node) && typeof node.id === "string") out += ` "${node.id}"`;
    } else {
      out += out === "" ? String(part) : `.${String(part)}`;
    }
  }
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The YAML parser's message quotes the offending source line; a keys file
 * must never be echoed into logs (someone may have pasted a key into it), so
 * keep only the first sentence, which names the problem and the position.
 */
function yamlErrorSummary(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split(":\n")[0] ?? message;
}
