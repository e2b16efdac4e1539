import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { FetchError, fetchModel } from "../../../runtime/fetch/fetch-model.js";
import { MARKER_FILE } from "../../../runtime/fetch/safe-path.js";
import {
  digests,
  exists,
  modelTree,
  readTree,
  sha256,
  sha256sums,
  tempDir,
  writeTree,
} from "./helpers.js";

async function modelFolder(): Promise<{ src: string; uri: string }> {
  const src = join(await tempDir(), "src");
  await writeTree(src, modelTree());
  return { src, uri: pathToFileURL(src).toString() };
}

describe("fetchModel with file://", () => {
  it("copies a folder recursively and records a marker", async () => {
    const { uri } = await modelFolder();
    const dest = join(await tempDir(), "models", "tiny");
    const result = await fetchModel({ source: uri, dest, env: {} });

    const { [MARKER_FILE]: marker, ...copied } = await readTree(dest);
    expect(digests(copied)).toEqual(digests(modelTree()));
    expect(result.alreadyPresent).toBe(false);
    expect(result.files.map((f) => f.path)).toEqual([
      "config.json",
      "onnx/model.onnx",
      "tokenizer.json",
    ]);
    const recorded = JSON.parse(marker?.toString() ?? "{}") as { source: string; files: unknown[] };
    expect(recorded.source).toBe(uri);
    expect(recorded.files).toContainEqual({
      path: "onnx/model.onnx",
      size: 300_000,
      sha256: sha256(modelTree()["onnx/model.onnx"] as Buffer),
    });
    expect(await exists(`${dest}.partial`)).toBe(false);
  });

  it("copies a single file", async () => {
    const { src } = await modelFolder();
    const dest = join(await tempDir(), "one");
    await fetchModel({ source: pathToFileURL(join(src, "config.json")).toString(), dest, env: {} });
    expect(Object.keys(await readTree(dest)).sort()).toEqual([MARKER_FILE, "config.json"]);
  });

  it("is a no-op the second time (marker matches)", async () => {
    const { uri } = await modelFolder();
    const dest = join(await tempDir(), "tiny");
    await fetchModel({ source: uri, dest, env: {} });
    const before = await stat(join(dest, MARKER_FILE));
    const second = await fetchModel({ source: uri, dest, env: {} });
    expect(second.alreadyPresent).toBe(true);
    expect(second.bytesDownloaded).toBe(0);
    expect((await stat(join(dest, MARKER_FILE))).mtimeMs).toBe(before.mtimeMs);
  });

  it("fetches again when a file in dest was changed in size", async () => {
    const { uri } = await modelFolder();
    const dest = join(await tempDir(), "tiny");
    await fetchModel({ source: uri, dest, env: {} });
    await writeFile(join(dest, "config.json"), "{}");
    const again = await fetchModel({ source: uri, dest, env: {} });
    expect(again.alreadyPresent).toBe(false);
    expect(await readFile(join(dest, "config.json"))).toEqual(modelTree()["config.json"]);
  });

  it("replaces an existing destination that holds something else", async () => {
    const { uri } = await modelFolder();
    const dest = join(await tempDir(), "tiny");
    await writeTree(dest, { "stale.bin": Buffer.from("old model") });
    await fetchModel({ source: uri, dest, env: {} });
    const tree = await readTree(dest);
    expect(tree["stale.bin"]).toBeUndefined();
    expect(tree["config.json"]).toEqual(modelTree()["config.json"]);
    expect(await exists(`${dest}.old`)).toBe(false);
  });

  it("uses a SHA256SUMS file found in the source", async () => {
    const { src, uri } = await modelFolder();
    const tree = modelTree();
    await writeFile(join(src, "SHA256SUMS"), sha256sums(tree));
    await writeFile(join(src, "config.json"), "tampered");
    const dest = join(await tempDir(), "tiny");
    const error = await fetchModel({ source: uri, dest, env: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FetchError);
    expect((error as FetchError).code).toBe("checksum_mismatch");
    expect((error as FetchError).message).toContain("config.json");
    expect(await exists(dest)).toBe(false);
    // The bad file is gone from staging, so a retry downloads it again.
    const staged = await readTree(`${dest}.partial`);
    expect(Object.keys(staged).some((p) => p.endsWith("config.json"))).toBe(false);
  });

  it("keeps the old destination when a fetch fails", async () => {
    const { uri } = await modelFolder();
    const dest = join(await tempDir(), "tiny");
    await fetchModel({ source: uri, dest, env: {} });
    const wrong = "0".repeat(64);
    await expect(
      fetchModel({ source: uri, dest, env: {}, checksums: { "config.json": wrong } }),
    ).rejects.toMatchObject({ code: "checksum_mismatch" });
    expect((await readTree(dest))["config.json"]).toEqual(modelTree()["config.json"]);
  });

  it("fails with source_not_found for a missing folder", async () => {
    const dest = join(await tempDir(), "tiny");
    await expect(
      fetchModel({ source: "file:///nonexistent/modelgate/model", dest, env: {} }),
    ).rejects.toMatchObject({ code: "source_not_found" });
    expect(await exists(dest)).toBe(false);
  });

  it("fails with missing_file when a pinned checksum names a file the source lacks", async () => {
    const { uri } = await modelFolder();
    const dest = join(await tempDir(), "tiny");
    await expect(
      fetchModel({ source: uri, dest, env: {}, checksums: { "onnx/other.onnx": "a".repeat(64) } }),
    ).rejects.toMatchObject({ code: "missing_file" });
  });
});

describe("fetchModel source checks", () => {
  it.each(["gs://bucket/model", "pvc://claim/model", "ftp://host/model"])(
    "rejects %s with unsupported_source_scheme naming the scheme",
    async (source) => {
      const dest = join(await tempDir(), "tiny");
      const error = (await fetchModel({ source, dest, env: {} }).catch(
        (e: unknown) => e,
      )) as FetchError;
      expect(error.code).toBe("unsupported_source_scheme");
      expect(error.message).toContain(`"${source.split(":")[0]}://"`);
      expect(await exists(dest)).toBe(false);
    },
  );

  it("rejects a source that is not a URI", async () => {
    await expect(
      fetchModel({ source: "/models/tiny", dest: "/tmp/x", env: {} }),
    ).rejects.toMatchObject({ code: "invalid_source_uri" });
  });

  it("rejects invalid options with invalid_fetch_options", async () => {
    await expect(fetchModel({ source: "file:///x", dest: "", env: {} })).rejects.toMatchObject({
      code: "invalid_fetch_options",
    });
  });
});
