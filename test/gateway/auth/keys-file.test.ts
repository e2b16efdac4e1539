import { describe, expect, it } from "vitest";
import { generateApiKey } from "../../../gateway/auth/key-format.js";
import { KeysFileError, parseKeysFile } from "../../../gateway/auth/keys-file.js";

const hash = (): string => generateApiKey().hash;

function issuesOf(text: string): readonly string[] {
  try {
    parseKeysFile(text, "keys.yaml");
  } catch (error) {
    expect(error).toBeInstanceOf(KeysFileError);
    expect((error as Error).message).toContain("keys.yaml");
    return (error as KeysFileError).issues;
  }
  throw new Error("expected the file to be rejected");
}

describe("keys file", () => {
  it("reads YAML and JSON alike, defaulting a key's projects to its account's", () => {
    const h = hash();
    const yaml = `
accounts:
  - id: acme
    projects: [web, batch]
keys:
  - id: key_a
    hash: ${h}
    account: acme
    rateLimit: { requestsPerMinute: 120, burst: 10 }
`;
    const json = JSON.stringify({
      accounts: [{ id: "acme", projects: ["web", "batch"] }],
      keys: [
        { id: "key_a", hash: h, account: "acme", rateLimit: { requestsPerMinute: 120, burst: 10 } },
      ],
    });
    for (const text of [yaml, json]) {
      const snapshot = parseKeysFile(text);
      expect(snapshot.keyCount).toBe(1);
      const stored = snapshot.byHash.get(h.slice(7));
      expect(stored?.key).toEqual({
        id: "key_a",
        account: "acme",
        projects: ["web", "batch"],
        admin: false,
        rateLimit: { requestsPerMinute: 120, burst: 10 },
      });
      expect(stored?.revoked).toBe(false);
    }
  });

  it("names the entry (index and id) in schema errors", () => {
    const issues = issuesOf(`
accounts: [{ id: acme, projects: [web] }]
keys:
  - { id: good, hash: ${hash()}, account: acme }
  - { id: key_b, hash: "mg_live_notahash", account: acme }
  - { id: key_c, hash: ${hash()}, account: acme, rateLimit: { requestsPerMinute: 0, burst: 1.5 } }
  - { id: key_d, hash: ${hash()}, account: acme, colour: blue }
`);
    expect(issues.some((i) => i.startsWith('keys[1] "key_b".hash:') && i.includes("sha256:"))).toBe(
      true,
    );
    expect(issues.some((i) => i.startsWith('keys[2] "key_c".rateLimit.requestsPerMinute'))).toBe(
      true,
    );
    expect(issues.some((i) => i.startsWith('keys[2] "key_c".rateLimit.burst'))).toBe(true);
    expect(issues.some((i) => i.startsWith('keys[3] "key_d"') && i.includes("colour"))).toBe(true);
    expect(issues.join("\n")).not.toContain("good");
  });

  it("checks references and duplicates across entries", () => {
    const h = hash();
    const issues = issuesOf(`
accounts:
  - { id: acme, projects: [web] }
  - { id: acme, projects: [] }
keys:
  - { id: key_a, hash: ${h}, account: acme }
  - { id: key_a, hash: ${hash()}, account: acme }
  - { id: key_b, hash: ${h}, account: acme }
  - { id: key_c, hash: ${hash()}, account: ghost }
  - { id: key_d, hash: ${hash()}, account: acme, projects: [web, secret] }
`);
    expect(issues).toEqual(
      expect.arrayContaining([
        'accounts[1] "acme": duplicate id',
        'keys[1] "key_a": duplicate id',
        'keys[2] "key_b": same hash as key "key_a"',
        'keys[3] "key_c": account "ghost" is not listed in accounts',
        'keys[4] "key_d": projects "secret" are not projects of account "acme"',
      ]),
    );
  });

  it("marks a key with role admin, and refuses a role it does not know", () => {
    const h = hash();
    const text = `accounts: [{ id: acme }]\nkeys:\n  - { id: key_a, hash: ${h}, account: acme, role: admin }\n`;
    expect(parseKeysFile(text).byHash.get(h.slice(7))?.key.admin).toBe(true);
    const owner = `accounts: [{ id: acme }]\nkeys:\n  - { id: key_a, hash: ${hash()}, account: acme, role: owner }\n`;
    expect(issuesOf(owner)[0]).toMatch(/^keys\[0\] "key_a"\.role/);
  });

  it("rejects an empty file and text that is not YAML", () => {
    expect(issuesOf("")).toEqual(["the file is empty"]);
    expect(issuesOf("keys: [ {")[0]).toMatch(/^not valid YAML or JSON/);
    expect(issuesOf("- just a list")[0]).toMatch(/^\(top level\)/);
  });
});
