import { readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey } from "../../../gateway/auth/key-format.js";
import { KeysFileError, parseKeysFile } from "../../../gateway/auth/keys-file.js";
import { GEN, read } from "../conformance/support.js";
import { startPlatform, type Platform } from "../support/platform.js";

describe("keys file: projectRateLimits", () => {
  it("gives every key of the account the project's limit, and refuses a project not listed", () => {
    const [a, b] = [generateApiKey(), generateApiKey()];
    const snapshot = parseKeysFile(
      `accounts:\n  - id: acme\n    projects: [web, batch]\n    projectRateLimits:\n      web: { requestsPerMinute: 60, burst: 5, tokensPerMinute: 1000 }\n` +
        `keys:\n  - id: ka\n    hash: ${a.hash}\n    account: acme\n  - id: kb\n    hash: ${b.hash}\n    account: acme\n    projects: [batch]\n`,
    );
    const keys = [...snapshot.byHash.values()].map((stored) => stored.key);
    for (const key of keys) {
      expect(key.projectRateLimits?.get("web")).toEqual({
        requestsPerMinute: 60,
        burst: 5,
        tokensPerMinute: 1000,
      });
      expect(key.projectRateLimits?.get("batch")).toBeUndefined();
    }

    let error: unknown;
    try {
      parseKeysFile(
        `accounts:\n  - id: acme\n    projects: [web]\n    projectRateLimits:\n      lab: { requestsPerMinute: 60, burst: 5 }\nkeys: []\n`,
        "keys.yaml",
      );
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(KeysFileError);
    expect((error as KeysFileError).issues).toEqual([
      `accounts[0] "acme".projectRateLimits: "lab" not in the account's projects`,
    ]);
  });
});

/**
 * A project's limit on real requests: shared by the keys of its account that
 * name it, on top of each key's own, and absent for requests not scoped to it.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
  const keysFile = join(dirname(p.stateDir), "keys.yaml");
  const text = await readFile(keysFile, "utf8");
  const limited = text.replace(
    "  - id: acme\n    projects: [web, batch]\n",
    "  - id: acme\n    projects: [web, batch]\n    projectRateLimits:\n      web: { requestsPerMinute: 1, burst: 3 }\n",
  );
  expect(limited).not.toBe(text);
  // On disk (so the file watcher reads the same) and applied at once.
  await writeFile(keysFile, limited);
  expect(p.components.deps.keys.replaceFromText(limited).ok).toBe(true);
});
afterAll(async () => p?.close());

describe("project rate limits", () => {
  it("every key naming the project takes from one bucket; others are not limited by it", async () => {
    const web = { "x-project-id": "web" };
    const answers = [
      await read(p.api(GEN, { headers: web })),
      await read(p.api(GEN, { key: p.keys.acmeWeb.key, headers: web })),
      await read(p.api(GEN, { headers: web })),
      await read(p.api(GEN, { key: p.keys.acmeWeb.key, headers: web })),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
    // The headers tell the tighter bucket: the project's.
    expect(answers.map((a) => a.headers.get("x-ratelimit-remaining-requests"))).toEqual([
      "2",
      "1",
      "0",
      "0",
    ]);
    expect(answers[3]!.headers.get("x-ratelimit-limit-requests")).toBe("3");
    expect(answers[3]!.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
    // Not scoped to the project, or scoped to another: only the key's own limit.
    expect((await read(p.api(GEN))).status).toBe(200);
    expect((await read(p.api(GEN, { headers: { "x-project-id": "batch" } }))).status).toBe(200);
  });
});
