import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { runKeysCreate, runKeysCreateCommand } from "../../../gateway/auth/keys-command.js";
import { KeyStore } from "../../../gateway/auth/key-store.js";
import { parseKeysFile } from "../../../gateway/auth/keys-file.js";

function sink(): { out: { write(s: string): void }; text: () => string } {
  let text = "";
  return { out: { write: (s: string) => void (text += s) }, text: () => text };
}

describe("modelgate keys create", () => {
  it("prints the key once and a YAML entry with its hash that the gateway accepts", () => {
    const { out, text } = sink();
    const result = runKeysCreate({
      account: "acme",
      projects: ["web"],
      id: "key_ci",
      out,
      now: () => new Date("2025-01-02T03:04:05Z"),
    });
    const printed = text();
    const keys = printed.match(/mg_live_[0-9A-Za-z]{38}/g) ?? [];
    expect(keys).toHaveLength(1);
    const key = keys[0]!;
    expect(result.hash).toMatch(/^sha256:[0-9a-f]{64}$/);

    // The indented block after the prompt is a YAML list with one entry.
    const yamlBlock = printed.slice(printed.indexOf("  - id:"));
    const [entry] = parseYaml(yamlBlock.replace(/^ {2}/gm, "")) as Record<string, unknown>[];
    expect(entry).toEqual({
      id: "key_ci",
      hash: result.hash,
      account: "acme",
      projects: ["web"],
      created: "2025-01-02T03:04:05.000Z",
    });
    expect(JSON.stringify(entry)).not.toContain(key);

    const file = { accounts: [{ id: "acme", projects: ["web", "batch"] }], keys: [entry] };
    const store = new KeyStore(parseKeysFile(JSON.stringify(file)));
    expect(store.authenticate(key)).toMatchObject({
      ok: true,
      key: { id: "key_ci", projects: ["web"] },
    });
  });

  it("prints one JSON line for scripts", () => {
    const { out, text } = sink();
    runKeysCreate({
      account: "acme",
      format: "json",
      rateLimit: { requestsPerMinute: 60, burst: 5 },
      out,
    });
    const parsed = JSON.parse(text()) as { key: string; entry: Record<string, unknown> };
    expect(parsed.key).toMatch(/^mg_live_/);
    expect(parsed.entry).toMatchObject({
      account: "acme",
      rateLimit: { requestsPerMinute: 60, burst: 5 },
    });
    expect(parsed.entry.id).toMatch(/^key_/);
  });

  it("the command adapter maps flags and reports bad input with exit code 2", async () => {
    const ok = sink();
    expect(
      await runKeysCreateCommand(
        { account: "acme", project: ["web", "batch"], requestsPerMinute: "120", burst: "10" },
        { out: ok.out },
      ),
    ).toBe(0);
    expect(ok.text()).toContain("projects:");
    expect(ok.text()).toContain("requestsPerMinute: 120");

    const tokens = sink();
    expect(
      await runKeysCreateCommand(
        { account: "acme", requestsPerMinute: "120", burst: "10", tokensPerMinute: "5000" },
        { out: tokens.out },
      ),
    ).toBe(0);
    expect(tokens.text()).toContain("tokensPerMinute: 5000");
    const alone = sink();
    expect(
      await runKeysCreateCommand(
        { account: "acme", tokensPerMinute: "5000" },
        { out: ok.out, err: alone.out },
      ),
    ).toBe(2);
    expect(alone.text()).toContain("--tokens-per-minute needs");

    const bad = sink();
    expect(
      await runKeysCreateCommand({ account: "bad account!" }, { out: ok.out, err: bad.out }),
    ).toBe(2);
    expect(bad.text()).toMatch(/^modelgate keys create: account: /);
    expect(await runKeysCreateCommand({ account: "acme", burst: "3" }, { err: bad.out })).toBe(2);
    expect(bad.text()).toContain("go together");
  });
});
