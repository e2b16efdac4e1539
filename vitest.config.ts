import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // ONNX sessions are CPU heavy: files run one at a time on a 2-core machine
    // so that timing-sensitive batching tests are not starved by a neighbour.
    fileParallelism: false,
    reporters: ["default", "./test/support/summary-reporter.ts"],
  },
});
