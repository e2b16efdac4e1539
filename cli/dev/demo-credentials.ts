import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { checkKeyFormat, generateApiKey, storedHash } from "../../gateway/auth/key-format.js";

/**
 * What `modelgate dev` hands a newcomer: a demo API key, a payment signing
 * secret and the local provider's credential. They are made once and kept in
 * the state folder (owner-only files), so a restart of dev prints the same
 * key and curl lines that were copied into a script keep working.
 */
export const DEMO_ACCOUNT = "demo";
/** The project the demo key may use (the README's `x-project-id` example). */
export const DEMO_PROJECT = "web";
export const DEMO_KEY_ID = "key_demo";
export const DEMO_KID = "dev";

export interface DemoCredentials {
  apiKey: string;
  paySecret: string;
  providerCredential: string;
  /** Paths of the files the gateway reads. */
  files: { keys: string; paySecrets: string; paySecret: string; providerCredential: string };
  /** True when they were made now rather than read back. */
  created: boolean;
}

const FILES = {
  apiKey: "demo-api-key",
  paySecret: "pay-secret",
  providerCredential: "provider-credential",
} as const;

async function readKept(path: string, valid: (value: string) => boolean): Promise<string | null> {
  if (!existsSync(path)) return null;
  const value = (await readFile(path, "utf8")).trim();
  return valid(value) ? value : null;
}

async function keep(path: string, value: string): Promise<void> {
  await writeFile(path, `${value}\n`, { mode: 0o600 });
  // writeFile's mode applies only when it creates the file.
  await chmod(path, 0o600);
}

const isHex48 = (value: string) => /^[0-9a-f]{48}$/.test(value);
const isHex32 = (value: string) => /^[0-9a-f]{32}$/.test(value);

export async function loadOrCreateDemoCredentials(stateDir: string): Promise<DemoCredentials> {
  const at = (name: string) => join(stateDir, name);
  const kept = {
    apiKey: await readKept(at(FILES.apiKey), (key) => checkKeyFormat(key) === "ok"),
    paySecret: await readKept(at(FILES.paySecret), isHex48),
    providerCredential: await readKept(at(FILES.providerCredential), isHex32),
  };
  const apiKey = kept.apiKey ?? generateApiKey({ id: DEMO_KEY_ID }).key;
  const paySecret = kept.paySecret ?? randomBytes(24).toString("hex");
  const providerCredential = kept.providerCredential ?? randomBytes(16).toString("hex");
  if (!kept.apiKey) await keep(at(FILES.apiKey), apiKey);
  if (!kept.paySecret) await keep(at(FILES.paySecret), paySecret);
  if (!kept.providerCredential) await keep(at(FILES.providerCredential), providerCredential);

  // The gateway's own files are rewritten from the kept values on every start.
  const files = {
    keys: at("keys.yaml"),
    paySecrets: at("pay-secrets.yaml"),
    paySecret: at(FILES.paySecret),
    providerCredential: at(FILES.providerCredential),
  };
  await keep(
    files.keys,
    [
      "accounts:",
      `  - id: ${DEMO_ACCOUNT}`,
      `    projects: [${DEMO_PROJECT}]`,
      "keys:",
      `  - id: ${DEMO_KEY_ID}`,
      `    hash: ${storedHash(apiKey)}`,
      `    account: ${DEMO_ACCOUNT}`,
    ].join("\n"),
  );
  await keep(files.paySecrets, `${DEMO_KID}: ${paySecret}`);
  return {
    apiKey,
    paySecret,
    providerCredential,
    files,
    created: !kept.apiKey || !kept.paySecret || !kept.providerCredential,
  };
}
