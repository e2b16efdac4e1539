import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { KeyStore, type ReloadEvent } from "../../../gateway/auth/key-store.js";
import {
  capturingLogger,
  keysFileText,
  makeKey,
  tempDir,
  writeAtomically,
  writeSecretVolume,
} from "./support.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function openStore(text: string, options: { pollIntervalMs?: number } = {}) {
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  const path = join(dir, "keys.yaml");
  await writeFile(path, text);
  const { logger, lines } = capturingLogger();
  const store = await KeyStore.open({ path, logger, ...options });
  cleanups.push(() => store.close());
  return { store, path, dir, lines };
}

function nextReload(store: KeyStore, ok: boolean): Promise<ReloadEvent> {
  return new Promise((resolve) => {
    const off = store.onReload((event) => {
      if (event.ok === ok) {
        off();
        resolve(event);
      }
    });
  });
}

describe("keys file reload", () => {
  it("fails fast at start-up on an invalid file", async () => {
    await expect(openStore("keys: [{ id: x }]\n")).rejects.toThrow(/keys\[0\] "x"/);
  });

  it("takes a new key within 3 s and drops a key revoked in the new file", async () => {
    const oldKey = makeKey("acme");
    const { store, path } = await openStore(keysFileText([oldKey]));
    expect(store.authenticate(oldKey.key).ok).toBe(true);

    const newKey = makeKey("globex");
    const started = Date.now();
    await writeAtomically(path, keysFileText([{ ...oldKey, revoked: true }, newKey]));
    await expect
      .poll(() => store.authenticate(newKey.key).ok, { timeout: 3_000, interval: 20 })
      .toBe(true);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(store.authenticate(oldKey.key)).toMatchObject({ ok: false, reason: "revoked" });
  });

  it("reloads by polling when no watch event comes", async () => {
    const first = makeKey("acme");
    const { store, path } = await openStore(keysFileText([first]), { pollIntervalMs: 100 });
    const second = makeKey("acme");
    const reloaded = nextReload(store, true);
    await writeAtomically(path, keysFileText([second]));
    await reloaded;
    expect(store.authenticate(second.key).ok).toBe(true);
    expect(store.authenticate(first.key)).toEqual({ ok: false, reason: "unknown" });
  });

  it("keeps the keys in force when the new file is invalid, and logs an error", async () => {
    const key = makeKey("acme");
    const { store, path, lines } = await openStore(keysFileText([key]));
    const rejected = nextReload(store, false);
    await writeAtomically(path, `${keysFileText([key])}  - id: broken\n`);
    const event = await rejected;
    expect(event.ok).toBe(false);
    expect(store.authenticate(key.key).ok).toBe(true);
    expect(lines.some((l) => l.includes("keys file rejected") && l.includes('"level":50'))).toBe(
      true,
    );

    // A later valid file is taken again.
    const next = makeKey("acme");
    const accepted = nextReload(store, true);
    await writeAtomically(path, keysFileText([next]));
    await accepted;
    expect(store.authenticate(next.key).ok).toBe(true);
  });

  it("follows a Kubernetes Secret volume update (..data symlink swap)", async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const first = makeKey("acme");
    await writeSecretVolume(dir, "keys.yaml", keysFileText([first]), 1);
    const { logger } = capturingLogger();
    const store = await KeyStore.open({ path: join(dir, "keys.yaml"), logger });
    cleanups.push(() => store.close());
    expect(store.authenticate(first.key).ok).toBe(true);

    const second = makeKey("globex");
    await writeSecretVolume(dir, "keys.yaml", keysFileText([second]), 2);
    await expect
      .poll(() => store.authenticate(second.key).ok, { timeout: 3_000, interval: 20 })
      .toBe(true);
    expect(store.authenticate(first.key).ok).toBe(false);
  });

  it("never fails a valid key while the file is rewritten again and again", async () => {
    const stable = makeKey("acme");
    const { store, path } = await openStore(keysFileText([stable]), { pollIntervalMs: 10 });
    let reloads = 0;
    store.onReload((event) => (reloads += event.ok ? 1 : 0));
    let failures = 0;
    let checks = 0;
    const hammer = setInterval(() => {
      for (let i = 0; i < 200; i += 1) {
        checks += 1;
        if (!store.authenticate(stable.key).ok) failures += 1;
      }
    }, 1);
    try {
      for (let round = 0; round < 20; round += 1) {
        // Each version adds a key, so the content (and the snapshot) changes.
        const extras = Array.from({ length: round + 1 }, () => makeKey("globex"));
        await writeAtomically(path, keysFileText([stable, ...extras]));
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      await expect.poll(() => reloads, { timeout: 3_000 }).toBeGreaterThan(3);
    } finally {
      clearInterval(hammer);
    }
    expect(checks).toBeGreaterThan(1000);
    expect(failures).toBe(0);
  });

  it("never logs a raw key, only ids", async () => {
    const key = makeKey("acme");
    const { store, path, lines } = await openStore(keysFileText([key]));
    store.authenticate(key.key);
    const accepted = nextReload(store, true);
    const other = makeKey("acme");
    await writeAtomically(path, keysFileText([key, other]));
    await accepted;
    const rejected = nextReload(store, false);
    await writeAtomically(path, keysFileText([key]).replace(key.hash, key.key));
    await rejected;
    const unparsable = nextReload(store, false);
    await writeAtomically(path, `keys: [ {\n  a: ${key.key}`);
    await unparsable;
    const log = lines.join("");
    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(log).not.toContain(key.key);
    expect(log).not.toContain(other.key);
  });
});
