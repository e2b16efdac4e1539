/**
 * How many batch lines a replica keeps in flight: batch work fills the
 * runtimes' idle capacity only. Every batch answer carries the runtime's
 * interactive pressure (api/runtime-wire.ts, `INTERACTIVE_LOAD_HEADER`):
 * while interactive requests wait or run there, or arrived within the last
 * 250 ms, the limit halves; while none do, it grows by one per answer up to
 * `max`, so an idle runtime is soon given as many lines as it batches in one
 * step. A steady interactive stream keeps it at one line in flight. Additive increase, multiplicative
 * decrease, as TCP's congestion window: a burst of interactive traffic takes
 * the batch lines out of its way within a few answers.
 */
const MIN_SPACING_MS = 5;
const MAX_SPACING_MS = 100;

export class BatchPacer {
  private current: number;
  private spacing = 0;

  constructor(
    private readonly max: number,
    private readonly min = 1,
  ) {
    if (!(max >= 1) || !(min >= 1) || min > max) throw new Error("need 1 <= min <= max");
    this.current = max;
  }

  /** Lines to keep in flight now. */
  get limit(): number {
    return this.current;
  }

  /**
   * Milliseconds to wait before sending the next line: 0 unless interactive
   * pressure persists with the limit already at its minimum; then it doubles
   * per such answer (from 5 ms, up to 100 ms), so that beside a steady
   * interactive stream a replica sends a trickle, not one line per runtime
   * step, and its CPU (and the store's) stays with the interactive requests.
   */
  get spacingMs(): number {
    return this.spacing;
  }

  /** One batch answer came back, with the runtime's interactive pressure (0 when none). */
  observe(interactivePressure: number): void {
    if (interactivePressure > 0) {
      if (this.current === this.min) {
        this.spacing = Math.min(MAX_SPACING_MS, Math.max(MIN_SPACING_MS, this.spacing * 2));
      }
      this.current = Math.max(this.min, Math.floor(this.current / 2));
    } else {
      this.spacing = 0;
      this.current = Math.min(this.max, this.current + 1);
    }
  }
}
