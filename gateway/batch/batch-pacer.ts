/**
 * How many batch lines a replica keeps in flight, and how far apart it
 * sends them: batch work fills the runtimes' spare capacity. Every batch
 * answer carries the runtime's interactive pressure (api/runtime-wire.ts,
 * `INTERACTIVE_LOAD_HEADER`):
 *
 * - 0, no interactive traffic: the limit grows by one per answer up to
 *   `max`, with no wait between lines, so an idle runtime is soon given as
 *   many lines as it batches in one step;
 * - 1, interactive traffic the runtime keeps up with: the limit halves down
 *   to `min` (one line) and lines go at a steady pace, `shareSpacingMs`
 *   apart at least: the batch keeps a bounded share of the spare room
 *   beside the stream (about a hundred lines a second for a small model)
 *   instead of stopping. Not more: on a small machine every batch line also
 *   costs gateway and store CPU beside the interactive requests, and at a
 *   quarter of a step's room (8 lines in flight) the full benchmark's p99
 *   beside a batch tripled;
 * - above 1, interactive requests wait for a step: the limit halves, down
 *   to one line, and while that persists at one line the wait between
 *   lines doubles (from 5 ms up to 100 ms), so that the gateway's and the
 *   store's CPU stays with the interactive requests.
 *
 * Additive increase, multiplicative decrease, as TCP's congestion window: a
 * burst of interactive traffic takes the batch lines out of its way within
 * a few answers.
 */
const MIN_SPACING_MS = 5;
const MAX_SPACING_MS = 100;
/**
 * The default wait between lines beside interactive traffic the runtime
 * keeps up with (`--batch-paced-spacing-ms`).
 */
export const SHARE_SPACING_MS = 5;

export class BatchPacer {
  private current: number;
  private spacing = 0;
  private readonly min: number;
  private readonly shareSpacingMs: number;

  constructor(
    private readonly max: number,
    options: { min?: number | undefined; shareSpacingMs?: number | undefined } = {},
  ) {
    this.min = options.min ?? 1;
    this.shareSpacingMs = options.shareSpacingMs ?? SHARE_SPACING_MS;
    if (!(max >= 1) || !(this.min >= 1) || this.min > max) throw new Error("need 1 <= min <= max");
    if (!(this.shareSpacingMs >= 0)) throw new Error("shareSpacingMs must be 0 or more");
    this.current = max;
  }

  /** Lines to keep in flight now. */
  get limit(): number {
    return this.current;
  }

  /** Milliseconds to wait before sending the next line (0 with no interactive traffic). */
  get spacingMs(): number {
    return this.spacing;
  }

  /** One batch answer came back, with the runtime's interactive pressure (0 when none). */
  observe(interactivePressure: number): void {
    if (interactivePressure > 1) {
      if (this.current === this.min) {
        this.spacing = Math.min(MAX_SPACING_MS, Math.max(MIN_SPACING_MS, this.spacing * 2));
      }
      this.current = Math.max(this.min, Math.floor(this.current / 2));
    } else if (interactivePressure === 1) {
      this.spacing = this.shareSpacingMs;
      this.current = Math.max(this.min, Math.floor(this.current / 2));
    } else {
      this.spacing = 0;
      this.current = Math.min(this.max, this.current + 1);
    }
  }
}

/** Lines leased at once at most, and at least (a lease query per line or two would cost more than the lines). */
export const LEASE_LINES = { min: 8, max: 64 } as const;

/**
 * How many lines a worker leases at once: two steps' worth ahead (twice the
 * pacer's limit), and, when it runs them one by one at a steady pace, as many
 * as it would run in a quarter of the lease at that pace, so that paced down
 * beside interactive traffic it does not lease every few lines: at one line
 * every 5 ms, leases of 8 were a store transaction every 50 ms, and the store
 * spent more CPU per line paced than at full speed. The quarter keeps lines
 * leased ahead well inside their lease if the pace slows (the spacing goes
 * up to 20 times longer under an interactive burst; a slow model's lines
 * keep the lease at its minimum).
 */
export function leaseSize(pace: {
  limit: number;
  spacingMs: number;
  /** A line's recent time from sending to its answer (milliseconds). */
  lineMs: number;
  leaseMs: number;
}): number {
  const perSecond = (pace.limit * 1000) / Math.max(1, pace.spacingMs + pace.lineMs);
  const byPace = Math.floor((perSecond * pace.leaseMs) / 1000 / 4);
  return Math.min(LEASE_LINES.max, Math.max(LEASE_LINES.min, 2 * pace.limit, byPace));
}
