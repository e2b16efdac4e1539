/**
 * How many batch lines a replica keeps in flight: batch work fills the
 * runtimes' spare capacity. Every batch answer carries the runtime's
 * interactive pressure (api/runtime-wire.ts, `INTERACTIVE_LOAD_HEADER`):
 *
 * - 0, no interactive traffic: the limit grows by one per answer up to
 *   `max`, so an idle runtime is soon given as many lines as it batches in
 *   one step;
 * - 1, interactive traffic the runtime keeps up with: the limit settles at
 *   the share (a quarter of `max`), halving down to it or growing up to it.
 *   The runtime gives batch requests at most a share of each step while
 *   interactive traffic is about (runtime/engine/admission-queue.ts), and
 *   interactive ones go first: keeping that share fed is how the batch
 *   fills the room a steady stream leaves, instead of stopping for it;
 * - above 1, interactive requests wait for a step: the limit halves, down to
 *   one line, and while that persists at one line the lines are spaced out
 *   too, so that the gateway's and the store's CPU stays with the
 *   interactive requests.
 *
 * Additive increase, multiplicative decrease, as TCP's congestion window: a
 * burst of interactive traffic takes the batch lines out of its way within
 * a few answers.
 */
const MIN_SPACING_MS = 5;
const MAX_SPACING_MS = 100;
/** Of `max`, the lines kept in flight beside interactive traffic the runtime keeps up with. */
const SHARE = 0.25;

export class BatchPacer {
  private current: number;
  private spacing = 0;
  private readonly share: number;

  constructor(
    private readonly max: number,
    private readonly min = 1,
  ) {
    if (!(max >= 1) || !(min >= 1) || min > max) throw new Error("need 1 <= min <= max");
    this.current = max;
    this.share = Math.max(min, Math.ceil(max * SHARE));
  }

  /** Lines to keep in flight now. */
  get limit(): number {
    return this.current;
  }

  /**
   * Milliseconds to wait before sending the next line: 0 unless interactive
   * requests keep waiting with the limit already at its minimum; then it
   * doubles per such answer (from 5 ms, up to 100 ms).
   */
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
      return;
    }
    this.spacing = 0;
    if (interactivePressure === 1) {
      this.current =
        this.current > this.share
          ? Math.max(this.share, Math.floor(this.current / 2))
          : Math.min(this.share, this.current + 1);
    } else {
      this.current = Math.min(this.max, this.current + 1);
    }
  }
}
