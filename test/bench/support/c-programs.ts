// Builds the benchmarks' C programs (tcp-relay.c, sse-burst.c) with the
// machine's C compiler (`.ci/run` installs gcc from Debian), once per version
// of their source: each binary is kept under .cache/ named by the source's hash.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { access, mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const CACHE = fileURLToPath(new URL("../../../.cache/bench", import.meta.url));

/** The program's path, built on first use. */
export async function buildCProgram(name: "tcp-relay" | "sse-burst"): Promise<string> {
  const source = fileURLToPath(new URL(`./${name}.c`, import.meta.url));
  const hash = createHash("sha256")
    .update(await readFile(source))
    .digest("hex")
    .slice(0, 12);
  const path = join(CACHE, `${name}-${hash}`);
  try {
    await access(path);
    return path;
  } catch {
    // not built yet
  }
  await mkdir(CACHE, { recursive: true });
  try {
    await promisify(execFile)("cc", ["-O2", "-Wall", "-Wextra", "-Werror", "-o", path, source]);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    throw new Error(`${name}.c needs a C compiler: apt-get install gcc libc6-dev`);
  }
  return path;
}
