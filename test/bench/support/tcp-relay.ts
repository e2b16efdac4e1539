// Builds tcp-relay.c, the floor below the bare Node proxy, with the machine's
// C compiler (`.ci/run` installs gcc from Debian), once per version of its
// source: the binary is kept under .cache/ named by the source's hash.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { access, mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const SOURCE = fileURLToPath(new URL("./tcp-relay.c", import.meta.url));
const CACHE = fileURLToPath(new URL("../../../.cache/bench", import.meta.url));

/** The relay's path, built on first use. */
export async function buildTcpRelay(): Promise<string> {
  const source = await readFile(SOURCE);
  const hash = createHash("sha256").update(source).digest("hex").slice(0, 12);
  const path = join(CACHE, `tcp-relay-${hash}`);
  try {
    await access(path);
    return path;
  } catch {
    // not built yet
  }
  await mkdir(CACHE, { recursive: true });
  try {
    await promisify(execFile)("cc", ["-O2", "-Wall", "-Wextra", "-Werror", "-o", path, SOURCE]);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    throw new Error("the TCP relay floor needs a C compiler: apt-get install gcc libc6-dev");
  }
  return path;
}
