import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

/**
 * How many cores this container may use. In a pod that is the CPU limit,
 * enforced as a CFS quota; the host's core count would oversubscribe it.
 */

/** cgroup v2 `cpu.max`: "<quota> <period>" or "max <period>". */
export function parseCpuMax(text: string): number | null {
  const [quota, period] = text.trim().split(/\s+/);
  if (!quota || quota === "max" || !period) return null;
  return coresFrom(Number(quota), Number(period));
}

/** cgroup v1: `cpu.cfs_quota_us` (-1 when unlimited) and `cpu.cfs_period_us`. */
export function parseCfsQuota(quotaText: string, periodText: string): number | null {
  return coresFrom(Number(quotaText.trim()), Number(periodText.trim()));
}

function coresFrom(quota: number, period: number): number | null {
  if (!Number.isFinite(quota) || !Number.isFinite(period) || quota <= 0 || period <= 0) return null;
  // A limit of 1.5 cores still gets 2 threads' worth of time slices over a
  // period; rounding up keeps a half core from going idle.
  return Math.max(1, Math.ceil(quota / period));
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

export function cgroupCpuLimit(root = "/sys/fs/cgroup"): number | null {
  const v2 = readOrNull(`${root}/cpu.max`);
  if (v2 !== null) return parseCpuMax(v2);
  const quota = readOrNull(`${root}/cpu/cpu.cfs_quota_us`);
  const period = readOrNull(`${root}/cpu/cpu.cfs_period_us`);
  if (quota !== null && period !== null) return parseCfsQuota(quota, period);
  return null;
}

/** Intra-op threads: the cgroup limit when there is one, never more than the cores we see. */
export function defaultIntraOpThreads(root?: string): number {
  const cores = availableParallelism();
  const limit = cgroupCpuLimit(root);
  return limit === null ? cores : Math.min(limit, cores);
}
