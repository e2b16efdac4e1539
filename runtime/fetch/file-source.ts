import { createReadStream } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { basename, dirname, join, relative, sep } from "node:path";
import { FetchError } from "./errors.js";
import type { ModelSource, OpenedFile, SourceFile, SourceListing } from "./source.js";

/**
 * `file:///abs/path`: a folder copied recursively, or a single file. Symbolic
 * links to files are followed (a Hugging Face cache snapshot is made of
 * them); links to folders are not, so a link loop cannot recurse forever.
 */
export function createFileSource(path: string): ModelSource {
  // For a single file, the "root" is its folder and the listing has one entry.
  let root = path;
  return {
    description: `file://${path}`,
    async list(): Promise<SourceListing> {
      const info = await statOrNotFound(path);
      if (info.isFile()) {
        root = dirname(path);
        return { files: [{ path: basename(path), size: info.size }] };
      }
      if (!info.isDirectory()) {
        throw new FetchError("source_not_found", `${path} is neither a file nor a folder`);
      }
      return { files: await walk(path, path) };
    },
    open(file: string, start: number): Promise<OpenedFile> {
      const full = join(root, ...file.split("/"));
      return Promise.resolve({
        body: createReadStream(full, { start, highWaterMark: 1 << 20 }),
        offset: start,
      });
    },
  };
}

async function walk(root: string, dir: string): Promise<SourceFile[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const files: SourceFile[] = [];
  for (const entry of entries) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) {
      files.push(...(await walk(root, full)));
      continue;
    }
    const info = entry.isSymbolicLink() ? await stat(full).catch(() => undefined) : undefined;
    if (entry.isFile() || info?.isFile()) {
      const size = info?.size ?? (await stat(full)).size;
      files.push({ path: relative(root, full).split(sep).join("/"), size });
    }
  }
  return files;
}

async function statOrNotFound(path: string) {
  try {
    return await stat(path);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new FetchError("source_not_found", `${path} does not exist`, { cause });
    }
    if (code === "EACCES" || code === "EPERM") {
      throw new FetchError("access_denied", `${path} is not readable`, { cause });
    }
    throw cause;
  }
}
