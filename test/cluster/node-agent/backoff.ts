/**
 * How long a crashed container waits before its next start. The kubelet
 * starts at 10 s and caps at 5 min; a test agent must show restarts within
 * a test's patience, so this starts at 1 s and caps at 30 s. A container that
 * ran for longer than RESET_AFTER_MS is treated as healthy again.
 */
export const BASE_BACKOFF_MS = 1_000;
export const MAX_BACKOFF_MS = 30_000;
export const RESET_AFTER_MS = 60_000;

/** `failures` counts consecutive failed runs, the one that just ended included. */
export function restartDelayMs(failures: number): number {
  if (failures <= 0) return 0;
  return Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** (failures - 1));
}

export function nextFailureCount(previous: number, ranForMs: number): number {
  return ranForMs >= RESET_AFTER_MS ? 1 : previous + 1;
}
