import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino, type Logger } from "pino";
import { afterEach } from "vitest";

const cleanups: (() => unknown)[] = [];

/** Registers a cleanup that runs after the current test, last registered first. */
export function onCleanup(cleanup: () => unknown): void {
  cleanups.push(cleanup);
}

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

export async function outboxDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "mg-outbox-"));
  onCleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export function logs(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: pino({ level: "debug" }, { write: (l: string) => void lines.push(l) }), lines };
}

export const fastRetry = { baseDelayMs: 10, maxDelayMs: 80 };
