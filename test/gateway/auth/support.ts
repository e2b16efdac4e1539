import { mkdtemp, rename, rm, symlink, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino, type Logger } from "pino";
import { generateApiKey, type GeneratedKey } from "../../../gateway/auth/key-format.js";

export interface KeyFixture extends GeneratedKey {
  account: string;
  projects?: string[];
  revoked?: boolean;
}

export function makeKey(account: string, extra: Partial<KeyFixture> = {}): KeyFixture {
  return { ...generateApiKey(), account, ...extra };
}

/** A keys file in YAML, as an operator would write it. */
export function keysFileText(keys: KeyFixture[]): string {
  const lines = [
    "accounts:",
    "  - id: acme",
    "    projects: [web, batch]",
    "  - id: globex",
    "    projects: [lab]",
    "keys:",
  ];
  for (const k of keys) {
    lines.push(`  - id: ${k.id}`, `    hash: ${k.hash}`, `    account: ${k.account}`);
    if (k.projects) lines.push(`    projects: [${k.projects.join(", ")}]`);
    if (k.revoked) lines.push("    revoked: true");
  }
  return `${lines.join("\n")}\n`;
}

export async function tempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "mg-auth-"));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Replaces a file the way editors and config tools do: write aside, rename over. */
export async function writeAtomically(path: string, text: string): Promise<void> {
  await writeFile(`${path}.tmp`, text);
  await rename(`${path}.tmp`, path);
}

/**
 * Updates a folder the way the kubelet updates a Secret volume: a new
 * timestamped folder, then the `..data` symlink swapped to it by rename. The
 * visible file is a symlink through `..data` and is never itself modified.
 */
export async function writeSecretVolume(
  dir: string,
  file: string,
  text: string,
  version: number,
): Promise<void> {
  const folder = `..v${version}`;
  await mkdir(join(dir, folder));
  await writeFile(join(dir, folder, file), text);
  await symlink(folder, join(dir, "..data_tmp"));
  await rename(join(dir, "..data_tmp"), join(dir, "..data"));
  await symlink(join("..data", file), join(dir, file)).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "EEXIST") throw error;
  });
}

/** A pino logger whose lines are kept, to check what is (not) logged. */
export function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => void lines.push(line) });
  return { logger, lines };
}
