import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  cgroupCpuLimit,
  defaultIntraOpThreads,
  parseCfsQuota,
  parseCpuMax,
} from "../../runtime/engine/cpu-limit.js";

describe("CPU limit from the cgroup", () => {
  it.each([
    ["max 100000", null],
    ["200000 100000", 2],
    ["150000 100000", 2],
    ["50000 100000", 1],
    ["400000 100000\n", 4],
    ["garbage", null],
  ])("cpu.max %j → %j", (text, cores) => {
    expect(parseCpuMax(text)).toBe(cores);
  });

  it("reads cgroup v1 quota and period", () => {
    expect(parseCfsQuota("-1", "100000")).toBeNull();
    expect(parseCfsQuota("300000", "100000")).toBe(3);
  });

  it("prefers v2, falls back to v1, and caps at the visible cores", () => {
    const v2 = mkdtempSync(join(tmpdir(), "cg2-"));
    writeFileSync(join(v2, "cpu.max"), "100000 100000");
    expect(cgroupCpuLimit(v2)).toBe(1);
    expect(defaultIntraOpThreads(v2)).toBe(1);

    const v1 = mkdtempSync(join(tmpdir(), "cg1-"));
    mkdirSync(join(v1, "cpu"));
    writeFileSync(join(v1, "cpu", "cpu.cfs_quota_us"), "6400000");
    writeFileSync(join(v1, "cpu", "cpu.cfs_period_us"), "100000");
    expect(cgroupCpuLimit(v1)).toBe(64);
    expect(defaultIntraOpThreads(v1)).toBe(Math.min(64, availableParallelism()));

    const none = mkdtempSync(join(tmpdir(), "cg0-"));
    expect(cgroupCpuLimit(none)).toBeNull();
    expect(defaultIntraOpThreads(none)).toBe(availableParallelism());
  });
});
