import type { PastCache } from "./decoder-feeds.js";

/**
 * The KV cache of recent sequences (prompt plus the output fed back), kept
 * after they finish so that a later prompt starting with the same tokens (a
 * continued conversation: the previous prompt, its answer, a new turn; or a
 * shared system prompt) prefills only what follows them. A position's keys
 * and values depend only on the tokens up to it, so any prefix of a stored
 * sequence is a valid past for a prompt that starts with it.
 *
 * Entries hold each past input's tensor compact, [1, kvHeads, length,
 * headDim], positions from the first; the total stays within a byte budget,
 * least recently used out first. A sequence that extends a stored one
 * replaces it (the longer holds every prefix the shorter did). A budget of
 * zero keeps nothing.
 *
 * Pure bookkeeping over typed arrays; the decode scheduler stores and looks up.
 */
export interface PrefixGeometry {
  /** Past input names, one tensor each. */
  names: readonly string[];
  kvHeads: number;
  headDim: number;
}

export interface PrefixHit {
  /** Prompt tokens whose positions the past holds: prefill the rest. */
  tokens: number;
  /** [1, kvHeads, tokens, headDim] per past input name. */
  past: PastCache;
}

interface Entry {
  tokens: readonly number[];
  kv: Readonly<Record<string, Float32Array>>;
  bytes: number;
}

/** Tokens `a` and `b` share from the start. */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const end = Math.min(a.length, b.length);
  let n = 0;
  while (n < end && a[n] === b[n]) n++;
  return n;
}

export class PrefixCache {
  /** Insertion order is recency: the first entry is the least recently used. */
  private readonly entries = new Set<Entry>();
  private held = 0;

  constructor(
    private readonly geometry: PrefixGeometry,
    readonly budgetBytes: number,
    /** Told the bytes held after every change, for a gauge. */
    private readonly onBytes?: (bytes: number) => void,
  ) {
    if (!(budgetBytes >= 0)) throw new Error("the prefix cache budget must be zero or more bytes");
  }

  get enabled(): boolean {
    return this.budgetBytes > 0;
  }

  /** Bytes of keys and values held. */
  get bytes(): number {
    return this.held;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Bytes one position takes across every past input. */
  get bytesPerToken(): number {
    const { names, kvHeads, headDim } = this.geometry;
    return names.length * kvHeads * headDim * Float32Array.BYTES_PER_ELEMENT;
  }

  /**
   * The longest stored prefix of `prompt`, leaving at least its last token to
   * prefill (the first output token's logits come from it); null when no
   * entry shares a token with it.
   */
  lookup(prompt: readonly number[]): PrefixHit | null {
    let best: Entry | null = null;
    let length = 0;
    for (const entry of this.entries) {
      const shared = Math.min(commonPrefix(entry.tokens, prompt), prompt.length - 1);
      if (shared > length) {
        best = entry;
        length = shared;
      }
    }
    if (!best) return null;
    this.touch(best);
    const tensors: Record<string, Float32Array> = {};
    for (const name of this.geometry.names) tensors[name] = this.slice(best, name, length);
    return { tokens: length, past: { length, tensors } };
  }

  /**
   * Keeps `tokens`' keys and values, `kv` holding [1, kvHeads, tokens.length,
   * headDim] per past input (stored as given: the caller hands over copies
   * nothing else writes). Entries it extends are dropped; one that already
   * extends it is only marked as used.
   */
  store(tokens: readonly number[], kv: Readonly<Record<string, Float32Array>>): void {
    if (!this.enabled || tokens.length === 0) return;
    const bytes = tokens.length * this.bytesPerToken;
    if (bytes > this.budgetBytes) return;
    const perName = bytes / this.geometry.names.length / Float32Array.BYTES_PER_ELEMENT;
    for (const name of this.geometry.names) {
      if (kv[name]?.length !== perName) {
        throw new Error(`'${name}' holds ${kv[name]?.length ?? 0} values, not ${perName}`);
      }
    }
    for (const entry of this.entries) {
      const shared = commonPrefix(entry.tokens, tokens);
      if (shared === tokens.length) {
        this.touch(entry);
        return;
      }
      if (shared === entry.tokens.length) this.drop(entry);
    }
    this.entries.add({ tokens: [...tokens], kv, bytes });
    this.held += bytes;
    for (const oldest of this.entries) {
      if (this.held <= this.budgetBytes) break;
      this.drop(oldest);
    }
    this.onBytes?.(this.held);
  }

  /** Forgets everything (a failed step, a test). */
  clear(): void {
    this.entries.clear();
    this.held = 0;
    this.onBytes?.(0);
  }

  private touch(entry: Entry): void {
    this.entries.delete(entry);
    this.entries.add(entry);
  }

  private drop(entry: Entry): void {
    this.entries.delete(entry);
    this.held -= entry.bytes;
  }

  /** The first `length` positions of an entry's tensor, compact; the stored array itself when whole. */
  private slice(entry: Entry, name: string, length: number): Float32Array {
    const data = entry.kv[name]!;
    if (length === entry.tokens.length) return data;
    const { kvHeads, headDim } = this.geometry;
    const stored = entry.tokens.length;
    const out = new Float32Array(kvHeads * length * headDim);
    for (let h = 0; h < kvHeads; h++) {
      const from = h * stored * headDim;
      out.set(data.subarray(from, from + length * headDim), h * length * headDim);
    }
    return out;
  }
}
