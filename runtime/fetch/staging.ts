import { lstat, mkdir, readFile, readdir, rename, rm, unlink, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { FetchError } from "./errors.js";
import { STAGING_STATE_DIR } from "./safe-path.js";

/**
 * The staging folder `<dest>.partial/` sits beside the destination so the
 * final rename stays on one filesystem (atomic). Inside it:
 *   <path>                                 a complete, verified file
 *   .modelgate-staging/identity.json       which source these bytes belong to
 *   .modelgate-staging/incomplete/<path>   bytes of a file still downloading
 */
export interface Staging {
  dir: string;
  /** Where a finished file lives. */
  finalPath(path: string): string;
  /** Where the bytes of a file still downloading live, kept for a resume. */
  partialPath(path: string): string;
}

export function stagingFor(dest: string): Staging {
  const dir = `${dest}.partial`;
  return {
    dir,
    finalPath: (path) => inside(dir, path),
    partialPath: (path) => inside(join(dir, STAGING_STATE_DIR, "incomplete"), path),
  };
}

function inside(root: string, path: string): string {
  const full = join(root, ...path.split("/"));
  // safeRelativePath already guarantees this; a second line of defence is cheap.
  if (!full.startsWith(root + sep)) {
    throw new FetchError("unsafe_path", `${path} resolves outside the staging folder`);
  }
  return full;
}

/**
 * Makes the staging folder ready for `identity`. Bytes left by an interrupted
 * fetch of the same source and revision are kept (that is the resume); bytes
 * of anything else are thrown away.
 */
export async function prepareStaging(staging: Staging, identity: string): Promise<void> {
  const identityFile = join(staging.dir, STAGING_STATE_DIR, "identity.json");
  const previous = await readFile(identityFile, "utf8").catch(() => undefined);
  if (previous !== identity) {
    await rm(staging.dir, { recursive: true, force: true });
  }
  await mkdir(dirname(identityFile), { recursive: true });
  if (previous !== identity) await writeFile(identityFile, identity);
}

/** Removes files a previous attempt left that the current plan does not list. */
export async function pruneStaging(staging: Staging, keep: ReadonlySet<string>): Promise<void> {
  for (const file of await listFiles(staging.dir, staging.dir)) {
    if (!keep.has(file)) await unlink(join(staging.dir, ...file.split("/")));
  }
}

async function listFiles(root: string, dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (dir === root && entry.name === STAGING_STATE_DIR) continue;
    if (entry.isDirectory()) found.push(...(await listFiles(root, full)));
    else found.push(relative(root, full).split(sep).join("/"));
  }
  return found;
}

export async function dropStagingState(staging: Staging): Promise<void> {
  await rm(join(staging.dir, STAGING_STATE_DIR), { recursive: true, force: true });
}

/**
 * Puts the complete staging folder at `dest`. When `dest` exists it is
 * renamed away first and deleted after, so at every instant `dest` is either
 * the old complete model, absent, or the new complete model.
 */
export async function commitStaging(staging: Staging, dest: string): Promise<void> {
  const old = `${dest}.old`;
  await rm(old, { recursive: true, force: true });
  const existing = await lstat(dest).catch(() => undefined);
  try {
    if (existing) await rename(dest, old);
    try {
      await rename(staging.dir, dest);
    } catch (err) {
      if (existing) await rename(old, dest).catch(() => undefined);
      throw err;
    }
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    const why =
      code === "EXDEV" || code === "EBUSY"
        ? "the destination is a mount point or on another filesystem; use a folder inside the volume"
        : (cause as Error).message;
    throw new FetchError("invalid_destination", `cannot move the model into ${dest}: ${why}`, {
      cause,
    });
  }
  await rm(old, { recursive: true, force: true });
}
