import { existsSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./cluster.js";

/** The bin folder of the tests' Python environment (test/python/venv.sh; `.ci/run` runs it). */
export const VENV_BIN = join(REPO_ROOT, ".cache", "pyvenv", "bin");

/**
 * A program of that environment, or undefined when it is not installed: a
 * test then says so and is skipped, except under `CI=true`, where a missing
 * install step is a failure.
 */
export function venvProgram(name: string, skipping: string): string | undefined {
  const path = join(VENV_BIN, name);
  if (existsSync(path)) return path;
  const line = `${name} is not installed (${path}); run test/python/venv.sh`;
  if (process.env.CI === "true") throw new Error(line);
  console.warn(`skipping ${skipping}: ${line}`);
  return undefined;
}
