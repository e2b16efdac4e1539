import { readFile } from "node:fs/promises";
import { timingSafeEqual } from "node:crypto";
import type { Logger } from "../../lib/logger.js";
import { checkKeyFormat, hashApiKey } from "./key-format.js";
import { FileWatcher } from "./file-watcher.js";
import { parseKeysFile, type AuthenticatedKey, type KeySnapshot } from "./keys-file.js";

export type AuthFailureReason = "missing" | "malformed" | "unknown" | "revoked";

/** `keyId` is set for a revoked key, so operators can see who still uses it. */
export type AuthResult =
  { ok: true; key: AuthenticatedKey } | { ok: false; reason: AuthFailureReason; keyId?: string };

/** `project` is the project the request is scoped to, when it named one. */
export type ProjectDecision = { ok: true; project?: string } | { ok: false; reason: "forbidden" };

export type ReloadEvent =
  { ok: true; keyCount: number; accountCount: number } | { ok: false; error: Error };

/**
 * Decides who a raw `x-api-key` value is. Pure over a snapshot.
 *
 * Order matters: the format check (prefix, length, CRC) rejects garbage before
 * any hashing; then the sha256 of the key finds its entry. Looking the hex up
 * in a map is not constant-time, but what it could leak is a prefix of the
 * hash of a 190-bit secret, which helps no one; the final comparison of the
 * digests is constant-time anyway, so the decision never rests on a
 * short-circuiting compare.
 */
export function authenticateWith(
  snapshot: KeySnapshot,
  rawKey: string | readonly string[] | undefined,
): AuthResult {
  if (rawKey === undefined || rawKey === "") return { ok: false, reason: "missing" };
  // A repeated header is ambiguous; refuse it rather than pick one.
  if (typeof rawKey !== "string") return { ok: false, reason: "malformed" };
  if (checkKeyFormat(rawKey) !== "ok") return { ok: false, reason: "malformed" };
  const hex = hashApiKey(rawKey);
  const stored = snapshot.byHash.get(hex);
  if (!stored || !timingSafeEqual(stored.digest, Buffer.from(hex, "hex"))) {
    return { ok: false, reason: "unknown" };
  }
  if (stored.revoked) return { ok: false, reason: "revoked", keyId: stored.key.id };
  return { ok: true, key: stored.key };
}

/**
 * `x-project-id` is optional (spec 5.1). When present it must be one of the
 * key's projects, which are its account's projects unless the key narrows
 * them. Pure.
 */
export function authorizeProject(
  key: AuthenticatedKey,
  projectId: string | readonly string[] | undefined,
): ProjectDecision {
  if (projectId === undefined || projectId === "") return { ok: true };
  if (typeof projectId !== "string") return { ok: false, reason: "forbidden" };
  return key.projects.includes(projectId)
    ? { ok: true, project: projectId }
    : { ok: false, reason: "forbidden" };
}

export interface KeyStoreFileOptions {
  path: string;
  logger: Logger;
  /** Poll period of the reload fallback; default 2 s. */
  pollIntervalMs?: number;
  /** Set false to load once and never reload (tests, one-shot tools). */
  watch?: boolean;
}

/**
 * The keys the gateway accepts, reloaded when the keys file changes.
 *
 * Every request reads one field, `snapshot`, synchronously; a reload builds a
 * complete new snapshot off to the side and replaces the field in one
 * assignment. A request therefore sees the old keys or the new ones, never a
 * mix and never an empty table, and no request waits on a reload. A new file
 * that fails validation is logged and ignored: the keys in force stay.
 */
export class KeyStore {
  private snapshot: KeySnapshot;
  private readonly listeners = new Set<(event: ReloadEvent) => void>();
  private readonly logger: Logger | undefined;
  private watcher: FileWatcher | undefined;
  private readonly source: string;

  constructor(snapshot: KeySnapshot, options: { logger?: Logger; source?: string } = {}) {
    this.snapshot = snapshot;
    this.logger = options.logger;
    this.source = options.source ?? "keys file";
  }

  /** Loads the file (a bad file at start-up throws: fail fast) and watches it. */
  static async open(options: KeyStoreFileOptions): Promise<KeyStore> {
    const text = await readFile(options.path, "utf8");
    const store = new KeyStore(parseKeysFile(text, options.path), {
      logger: options.logger,
      source: options.path,
    });
    options.logger.info(
      {
        keysFile: options.path,
        keys: store.snapshot.keyCount,
        accounts: store.snapshot.accountCount,
      },
      "API keys loaded",
    );
    if (options.watch !== false) {
      store.watcher = new FileWatcher({
        path: options.path,
        initialText: text,
        ...(options.pollIntervalMs !== undefined ? { pollIntervalMs: options.pollIntervalMs } : {}),
        onChange: (next) => store.replaceFromText(next),
        onError: (error) =>
          options.logger.error(
            { keysFile: options.path, err: error.message },
            "cannot read the keys file; keeping the keys in force",
          ),
      });
      store.watcher.start();
    }
    return store;
  }

  authenticate(rawKey: string | readonly string[] | undefined): AuthResult {
    return authenticateWith(this.snapshot, rawKey);
  }

  authorizeProject(
    key: AuthenticatedKey,
    projectId: string | readonly string[] | undefined,
  ): ProjectDecision {
    return authorizeProject(key, projectId);
  }

  get keyCount(): number {
    return this.snapshot.keyCount;
  }

  /**
   * Validates `text` as a whole keys file and, only if it is valid, swaps it in.
   * Public so that a caller with another source (an API, a test) can push content.
   */
  replaceFromText(text: string): ReloadEvent {
    let event: ReloadEvent;
    try {
      const next = parseKeysFile(text, this.source);
      this.snapshot = next;
      event = { ok: true, keyCount: next.keyCount, accountCount: next.accountCount };
      this.logger?.info(
        { keysFile: this.source, keys: next.keyCount, accounts: next.accountCount },
        "API keys reloaded",
      );
    } catch (error) {
      event = { ok: false, error: error as Error };
      // Validation messages name entries by id and index, never by key or hash.
      this.logger?.error(
        { keysFile: this.source, err: (error as Error).message },
        "keys file rejected; keeping the keys in force",
      );
    }
    for (const listener of this.listeners) listener(event);
    return event;
  }

  /** Called after every reload attempt, valid or not. Returns an unsubscribe function. */
  onReload(listener: (event: ReloadEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Forces a read of the file now (as a watch event would). */
  async checkNow(): Promise<void> {
    await this.watcher?.check();
  }

  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
    this.listeners.clear();
  }
}
