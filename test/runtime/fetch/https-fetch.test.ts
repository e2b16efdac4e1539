import { execFileSync } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fetchModel } from "../../../runtime/fetch/fetch-model.js";
import type { FetchError } from "../../../runtime/fetch/fetch-model.js";
import { exists, modelTree, readTree, sha256sums, tempDir } from "./helpers.js";
import { startModelServer } from "./model-server.js";

const hasOpenssl = (() => {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

/** A self-signed certificate for 127.0.0.1, made fresh for the test run. */
async function selfSigned(): Promise<{ key: string; cert: string; certFile: string }> {
  const dir = await tempDir();
  const keyFile = join(dir, "key.pem");
  const certFile = join(dir, "cert.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      keyFile,
      "-out",
      certFile,
    ],
    { stdio: "ignore" },
  );
  return { key: await readFile(keyFile, "utf8"), cert: await readFile(certFile, "utf8"), certFile };
}

const tree = modelTree();
const files = { ...tree, SHA256SUMS: Buffer.from(sha256sums(tree)) };

describe.skipIf(!hasOpenssl)("fetchModel with https://", () => {
  it("trusts a CA given as the ca option", async () => {
    const tls = await selfSigned();
    const server = await startModelServer({ files, tls });
    const dest = join(await tempDir(), "tiny");
    await fetchModel({ source: server.url, dest, env: {}, ca: tls.cert });
    expect(Object.keys(await readTree(dest))).toContain("onnx/model.onnx");
  });

  it("trusts a CA file named by MODELGATE_FETCH_CA_FILE", async () => {
    const tls = await selfSigned();
    const server = await startModelServer({ files, tls });
    const dest = join(await tempDir(), "tiny");
    await fetchModel({ source: server.url, dest, env: { MODELGATE_FETCH_CA_FILE: tls.certFile } });
    expect(await exists(join(dest, "config.json"))).toBe(true);
  });

  it("refuses an untrusted certificate without retrying", async () => {
    const tls = await selfSigned();
    const server = await startModelServer({ files, tls });
    const dest = join(await tempDir(), "tiny");
    const error = (await fetchModel({ source: server.url, dest, env: {} }).catch(
      (e: unknown) => e,
    )) as FetchError;
    expect(error.code).toBe("download_failed");
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/SHA256SUMS: .*(self[- ]signed|certificate)/i);
    expect(server.requests).toHaveLength(0);
    expect(await exists(dest)).toBe(false);
  });

  it("reports an unreadable CA file as invalid_fetch_options", async () => {
    const dir = await tempDir();
    const missing = join(dir, "nope.pem");
    await writeFile(join(dir, "placeholder"), "");
    await expect(
      fetchModel({
        source: "https://127.0.0.1:9/m/",
        dest: join(dir, "m"),
        env: { MODELGATE_FETCH_CA_FILE: missing },
      }),
    ).rejects.toMatchObject({ code: "invalid_fetch_options" });
  });
});
