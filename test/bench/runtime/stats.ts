/** Small summary statistics for benchmark samples; nothing here reads a clock. */

export function median(samples: readonly number[]): number {
  return quantile(samples, 0.5);
}

/** Linear interpolation between the closest ranks, as most tools report it. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  const low = sorted[lower]!;
  const high = sorted[upper]!;
  return low + (high - low) * (position - lower);
}

/** Spread as (max - min) / median, to show how much a median can be trusted. */
export function relativeSpread(samples: readonly number[]): number {
  if (samples.length === 0) return Number.NaN;
  const mid = median(samples);
  return (Math.max(...samples) - Math.min(...samples)) / mid;
}

export function ratio(numerator: number, denominator: number): number {
  return denominator > 0 ? numerator / denominator : Number.NaN;
}

/** A number with enough digits to compare, without noise: 1234, 123, 12.3, 1.23. */
export function fmt(value: number): string {
  if (!Number.isFinite(value)) return "n/a";
  const abs = Math.abs(value);
  if (abs >= 1000) return value.toFixed(0);
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/** Three decimals, so that a ratio just under a target never prints as the target. */
export function fmtRatio(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(3)}×` : "n/a";
}
