/**
 * The memory of payment signatures already used: a signature is accepted
 * once. Asynchronous and small on purpose, so that a shared store (Valkey,
 * issue 6) can back it for every replica; this file has the in-process
 * implementation one replica needs.
 */
export interface UsedSignatures {
  /**
   * Records `id` as used until `expiresAtMs` (after which the timestamp
   * check refuses the signature anyway). Resolves true when this call
   * claimed it, false when it was claimed before and has not expired: a
   * replay. Atomic: of two concurrent claims of one id, one wins.
   */
  claim(id: string, expiresAtMs: number): Promise<boolean>;
  /**
   * Forgets a claim, so that the same signed request may be sent again: for
   * a request refused before anything was served with a status the spec
   * tells a client to retry (a 429, a 408, a 5xx).
   */
  release(id: string): Promise<void>;
}

export interface InProcessUsedSignaturesOptions {
  /** Most ids held; past it the oldest are forgotten (counted in `evictedUnexpired`). */
  maxEntries?: number;
  now?: () => number;
}

/**
 * One process's memory. At the default bound, a replica can accept about
 * 1,700 signed requests a second for the 600 s a signature can live (300 s
 * tolerance either side) before it has to forget one early; forgetting early
 * is counted, and the oldest go first (the ones nearest their expiry).
 */
export const DEFAULT_MAX_USED_SIGNATURES = 1_000_000;

const CLAIMED = Promise.resolve(true);
const REPLAYED = Promise.resolve(false);
const RELEASED = Promise.resolve();

export class InProcessUsedSignatures implements UsedSignatures {
  /** id -> expiry (ms), in insertion order: roughly the order of expiry. */
  private readonly entries = new Map<string, number>();
  private readonly maxEntries: number;
  private readonly now: () => number;
  /** Ids dropped for room before they expired: each could be replayed once more. */
  evictedUnexpired = 0;

  constructor(options: InProcessUsedSignaturesOptions = {}) {
    this.maxEntries = Math.max(1, options.maxEntries ?? DEFAULT_MAX_USED_SIGNATURES);
    this.now = options.now ?? Date.now;
  }

  claim(id: string, expiresAtMs: number): Promise<boolean> {
    const now = this.now();
    this.forgetExpired(now);
    const held = this.entries.get(id);
    if (held !== undefined && held > now) return REPLAYED;
    if (held !== undefined) this.entries.delete(id);
    this.entries.set(id, expiresAtMs);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.entries().next().value!;
      this.entries.delete(oldest[0]);
      if (oldest[1] > now) this.evictedUnexpired += 1;
    }
    return CLAIMED;
  }

  release(id: string): Promise<void> {
    this.entries.delete(id);
    return RELEASED;
  }

  /** Ids held now; for a gauge and tests. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Drops expired ids from the front. Amortised O(1) per claim: each id is
   * dropped once; one that expires behind a longer-lived one waits for it
   * (or for `maxEntries`), which the bound keeps finite.
   */
  private forgetExpired(now: number): void {
    for (const [id, expiresAt] of this.entries) {
      if (expiresAt > now) return;
      this.entries.delete(id);
    }
  }
}
