import type { PastCache } from "./decoder-feeds.js";

/**
 * The KV cache of recent sequences (prompt plus the output fed back), kept
 * after they finish so that a later prompt starting with the same tokens (a
 * continued conversation: the previous prompt, its answer, a new turn; or a
 * shared system prompt) prefills only what follows them. A position's keys
 * and values depend only on the tokens up to it, so any prefix of a stored
 * sequence is a valid past for a prompt that starts with it.
 *
 * Only whole prefill chunks are kept and reused (`chunk`, see prefill.ts): a
 * stored sequence is cut down to a multiple of the chunk, and a hit is one
 * too, so the prefill after it computes exactly the chunks a prefill without
 * the cache would, from the same past. Callers store only positions a
 * prefill computed, never ones fed by decode steps (other shapes, other sums).
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
  /** Positions are kept and reused in whole chunks of this many (the prefill's); 1 if unset. */
  chunk?: number | undefined;
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
    if (!(this.chunk >= 1) || !Number.isInteger(this.chunk)) {
      throw new Error("the prefix cache chunk must be a positive integer");
    }
  }

  /** Positions are kept and reused in whole chunks of this many. */
  get chunk(): number {
    return this.geometry.chunk ?? 1;
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
   * The longest stored prefix of `prompt` in whole chunks, leaving at least
   * its last token to prefill (the first output token's logits come from
   * it); null when no entry shares a whole chunk with it.
   */
  lookup(prompt: readonly number[]): PrefixHit | null {
    let best: Entry | null = null;
    let length = 0;
    for (const entry of this.entries) {
      const shared = this.align(Math.min(commonPrefix(entry.tokens, prompt), prompt.length - 1));
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
   * Keeps the whole chunks of `tokens`' keys and values, `kv` holding [1,
   * kvHeads, tokens.length, headDim] per past input (copied: the caller may
   * go on using it). Entries it extends are dropped; one that already
   * extends it is only marked as used.
   */
  store(fed: readonly number[], kv: Readonly<Record<string, Float32Array>>): void {
    if (!this.enabled) return;
    const { names, kvHeads, headDim } = this.geometry;
    const perName = kvHeads * fed.length * headDim;
    for (const name of names) {
      if (kv[name]?.length !== perName) {
        throw new Error(`'${name}' holds ${kv[name]?.length ?? 0} values, not ${perName}`);
      }
    }
    const tokens = fed.slice(0, this.align(fed.length));
    if (tokens.length === 0) return;
    const bytes = tokens.length * this.bytesPerToken;
    if (bytes > this.budgetBytes) return;
    for (const entry of this.entries) {
      const shared = commonPrefix(entry.tokens, tokens);
      if (shared === tokens.length) {
        this.touch(entry);
        return;
      }
      if (shared === entry.tokens.length) this.drop(entry);
    }
    const kept: Record<string, Float32Array> = {};
    for (const name of names)
      kept[name] = firstPositions(kv[name]!, fed.length, tokens.length, this.geometry);
    this.entries.add({ tokens, kv: kept, bytes });
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

  private align(positions: number): number {
    return Math.floor(positions / this.chunk) * this.chunk;
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
    return firstPositions(data, entry.tokens.length, length, this.geometry);
  }
}

/** The first `length` of a compact [1, kvHeads, stored, headDim] tensor's positions, as a new compact tensor. */
function firstPositions(
  data: Float32Array,
  stored: number,
  length: number,
  { kvHeads, headDim }: PrefixGeometry,
): Float32Array {
  const out = new Float32Array(kvHeads * length * headDim);
  for (let h = 0; h < kvHeads; h++) {
    const from = h * stored * headDim;
    out.set(data.subarray(from, from + length * headDim), h * length * headDim);
  }
  return out;
}
