import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { afterEach } from "vitest";
import type { FetchLogger } from "../../../runtime/fetch/progress.js";

export type Tree = Record<string, Buffer>;

/** Fast retries so failure paths take milliseconds. */
export const FAST_RETRY = { attempts: 3, baseDelayMs: 1, maxDelayMs: 5 };

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Registers work to undo after the current test. */
export function onCleanup(fn: () => Promise<void>): void {
  cleanups.push(fn);
}

export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "modelgate-fetch-"));
  onCleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Deterministic pseudo-random bytes, so failures reproduce. */
export function bytes(length: number, seed: number): Buffer {
  const out = Buffer.alloc(length);
  let block = Buffer.alloc(0);
  for (let i = 0, counter = 0; i < length; i++) {
    if (i % 32 === 0) block = createHash("sha256").update(`${seed}:${counter++}`).digest();
    out[i] = block[i % 32] ?? 0;
  }
  return out;
}

/** A small model in the Hugging Face ONNX layout. */
export function modelTree(): Tree {
  return {
    "config.json": Buffer.from(JSON.stringify({ model_type: "gpt2", n_layer: 2 })),
    "tokenizer.json": Buffer.from(JSON.stringify({ version: "1.0", model: { type: "BPE" } })),
    "onnx/model.onnx": bytes(300_000, 1),
  };
}

export function sha256(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

export function sha256sums(tree: Tree): string {
  return Object.entries(tree)
    .map(([path, data]) => `${sha256(data)}  ${path}\n`)
    .join("");
}

export async function writeTree(root: string, tree: Tree): Promise<void> {
  for (const [path, data] of Object.entries(tree)) {
    const full = join(root, ...path.split("/"));
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, data);
  }
}

/** Every file under `root`, by relative POSIX path. */
export async function readTree(root: string): Promise<Tree> {
  const tree: Tree = {};
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else tree[relative(root, full).split(sep).join("/")] = await readFile(full);
    }
  };
  await walk(root);
  return tree;
}

export async function exists(path: string): Promise<boolean> {
  return readdir(dirname(path)).then(
    (names) => names.includes(path.slice(dirname(path).length + 1)),
    () => false,
  );
}

/** A logger that keeps every line, to assert on what would be printed. */
export function memoryLogger(): FetchLogger & { lines: string[] } {
  const lines: string[] = [];
  const log = (obj: Record<string, unknown>, msg: string): void => {
    lines.push(`${msg} ${JSON.stringify(obj)}`);
  };
  return { lines, info: log, warn: log };
}

/**
 * path → sha256 of each file: compare trees by this, since a deep equality
 * check on large Buffers is slow and its failure output unreadable.
 */
export function digests(tree: Tree): Record<string, string> {
  return Object.fromEntries(Object.entries(tree).map(([path, data]) => [path, sha256(data)]));
}

export async function fileDigest(path: string): Promise<string> {
  return sha256(await readFile(path));
}
