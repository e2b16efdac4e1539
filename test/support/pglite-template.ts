import { cp, mkdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { REPO_ROOT } from "./cluster.js";

/**
 * A new PGlite folder runs initdb in WebAssembly: seconds of CPU, for every
 * gateway a test starts with a fresh state folder. A copy of an empty
 * cluster made once (kept in .cache, per PGlite version) is the same
 * database and opens in a fraction of that. The gateway still runs its
 * migrations on it, as on any empty database.
 */
export async function seedPgliteFolder(dataDir: string): Promise<void> {
  const template = await pgliteTemplate();
  await mkdir(join(dataDir, ".."), { recursive: true });
  await cp(template, dataDir, { recursive: true });
}

let made: Promise<string> | undefined;

function pgliteTemplate(): Promise<string> {
  made ??= (async () => {
    const pkg = JSON.parse(
      await readFile(join(REPO_ROOT, "node_modules/@electric-sql/pglite/package.json"), "utf8"),
    ) as { version: string };
    const dir = join(REPO_ROOT, ".cache", "pglite-template", pkg.version);
    if (await exists(dir)) return dir;
    // Made aside and renamed into place: another test process making the
    // same template at the same moment never sees half of one.
    const building = `${dir}.${process.pid}.tmp`;
    await rm(building, { recursive: true, force: true });
    await mkdir(building, { recursive: true });
    const pglite = await PGlite.create(building);
    await pglite.close();
    await rename(building, dir).catch(async (error: unknown) => {
      await rm(building, { recursive: true, force: true });
      if (!(await exists(dir))) throw error;
    });
    return dir;
  })();
  return made;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
