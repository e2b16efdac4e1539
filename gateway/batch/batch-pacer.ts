/**
 * How many batch lines a replica keeps in flight: batch work fills the
 * runtimes' idle capacity only. Every batch answer carries the runtime's
 * interactive pressure (api/runtime-wire.ts, `INTERACTIVE_LOAD_HEADER`):
 * while interactive requests wait or run there, or arrived within the last
 * second, the limit halves; while none do, it grows by one per answer up to
 * `max`, so an idle runtime is soon given as many lines as it batches in one
 * step. A steady interactive stream keeps it at one line in flight. Additive increase, multiplicative
 * decrease, as TCP's congestion window: a burst of interactive traffic takes
 * the batch lines out of its way within a few answers.
 */
export class BatchPacer {
  private current: number;

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

  /** One batch answer came back, with the runtime's interactive pressure (0 when none). */
  observe(interactivePressure: number): void {
    this.current =
      interactivePressure > 0
        ? Math.max(this.min, Math.floor(this.current / 2))
        : Math.min(this.max, this.current + 1);
  }
}
