import { mulberry32 } from "../../fixtures/prng.js";

/**
 * A percentile bootstrap over a run's rounds: how far a statistic of the run
 * (the difference of two pooled medians, say) could move had the same
 * machine drawn other rounds. Rounds are resampled whole, with every side's
 * samples of a round kept together, because the streams of one round share
 * its moment on the machine and are not independent of each other.
 *
 * The resampling is seeded, so that a run's interval prints the same when
 * its rows are computed again: the randomness is the bench's, not the data's.
 */
export interface BootstrapOptions {
  /** How many resamples; 2,000 puts the 2.5th and 97.5th percentiles on 50 values each. */
  resamples?: number;
  /** The interval's coverage, 0.95 by default. */
  level?: number;
  seed?: number;
}

/**
 * The statistic is given the indices of the rounds drawn (with repeats),
 * as many as there were rounds, and returns its value on them. Returns the
 * interval's ends; both NaN when there are no rounds.
 */
export function bootstrapInterval(
  rounds: number,
  statistic: (drawn: readonly number[]) => number,
  { resamples = 2000, level = 0.95, seed = 0x5eed }: BootstrapOptions = {},
): [number, number] {
  if (rounds === 0) return [Number.NaN, Number.NaN];
  const random = mulberry32(seed);
  const values: number[] = [];
  const drawn = new Array<number>(rounds);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < rounds; i++) drawn[i] = Math.floor(random() * rounds);
    values.push(statistic(drawn));
  }
  values.sort((a, b) => a - b);
  const tail = (1 - level) / 2;
  const at = (q: number) => values[Math.min(values.length - 1, Math.floor(q * values.length))]!;
  return [at(tail), at(1 - tail)];
}
