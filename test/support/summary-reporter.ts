import type { Reporter, TestModule } from "vitest/node";

/**
 * CI reads the last line of the run: `N passed, N failed, N skipped`.
 * Vitest's own summary is not in that form, so this reporter prints it.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      const states = [...mod.children.allTests()].map((test) => test.result().state);
      const modPassed = states.filter((s) => s === "passed").length;
      const modFailed = states.filter((s) => s === "failed").length;
      let modSkipped = states.length - modPassed - modFailed;
      if (mod.state() === "failed" && modFailed === 0) {
        // A file that fails to load, or whose beforeAll fails, fails without
        // a failed test: its tests were never run, and each counts as failed
        // (a file with none as one), never as skipped.
        failed += Math.max(1, modSkipped);
        modSkipped = 0;
      }
      passed += modPassed;
      failed += modFailed;
      skipped += modSkipped;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
