import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FetchError, fetchModel } from "../../../runtime/fetch/fetch-model.js";
import type { FetchProgressEvent } from "../../../runtime/fetch/fetch-model.js";
import { MARKER_FILE } from "../../../runtime/fetch/safe-path.js";
import {
  FAST_RETRY,
  digests,
  exists,
  memoryLogger,
  modelTree,
  readTree,
  sha256,
  sha256sums,
  tempDir,
} from "./helpers.js";
import { startModelServer } from "./model-server.js";

const withSums = () => {
  const tree = modelTree();
  return { ...tree, SHA256SUMS: Buffer.from(sha256sums(tree)) };
};

describe("fetchModel with http://", () => {
  it("downloads the files SHA256SUMS lists and verifies them", async () => {
    const server = await startModelServer({ files: withSums() });
    const dest = join(await tempDir(), "tiny");
    const events: FetchProgressEvent[] = [];
    const result = await fetchModel({
      source: server.url,
      dest,
      env: {},
      onProgress: (e) => events.push(e),
    });

    const { [MARKER_FILE]: _marker, ...copied } = await readTree(dest);
    expect(digests(copied)).toEqual(digests(withSums()));
    expect(result.bytesDownloaded).toBe(
      Object.values(modelTree()).reduce((n, b) => n + b.length, 0) +
        (withSums().SHA256SUMS?.length ?? 0),
    );
    // SHA256SUMS is fetched once: the copy comes from the listing's bytes.
    expect(server.requests.filter((r) => r.path.endsWith("SHA256SUMS"))).toHaveLength(1);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: "file",
        path: "onnx/model.onnx",
        bytes: 300_000,
        done: true,
      }),
    );
    expect(events.at(-1)).toMatchObject({ type: "summary", files: 4, alreadyPresent: false });
  });

  it("takes the file list from the files option when there is no SHA256SUMS", async () => {
    const server = await startModelServer({ files: modelTree() });
    const dest = join(await tempDir(), "tiny");
    const config = modelTree()["config.json"] as Buffer;
    await fetchModel({
      source: server.url,
      dest,
      env: {},
      files: ["config.json", "onnx/model.onnx"],
      checksums: { "config.json": sha256(config) },
    });
    expect(Object.keys(await readTree(dest)).sort()).toEqual([
      MARKER_FILE,
      "config.json",
      "onnx/model.onnx",
    ]);
  });

  it("asks for a file list when there is neither SHA256SUMS nor files", async () => {
    const server = await startModelServer({ files: modelTree() });
    const dest = join(await tempDir(), "tiny");
    await expect(fetchModel({ source: server.url, dest, env: {} })).rejects.toMatchObject({
      code: "file_list_required",
    });
  });

  it("fails at once on 404, naming the file, and leaves no dest", async () => {
    const server = await startModelServer({ files: modelTree() });
    const dest = join(await tempDir(), "tiny");
    const error = (await fetchModel({
      source: server.url,
      dest,
      env: {},
      files: ["config.json", "missing.onnx"],
      retry: FAST_RETRY,
    }).catch((e: unknown) => e)) as FetchError;
    expect(error).toBeInstanceOf(FetchError);
    expect(error.code).toBe("source_not_found");
    expect(error.message).toContain("missing.onnx");
    expect(error.message).toContain("404");
    expect(server.requests.filter((r) => r.path.endsWith("missing.onnx"))).toHaveLength(1);
    expect(await exists(dest)).toBe(false);
  });

  it("fails at once on 403 with access_denied", async () => {
    const server = await startModelServer({
      files: withSums(),
      override: (_req, res, path) => {
        if (!path.endsWith("config.json")) return false;
        res.writeHead(403).end();
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    await expect(
      fetchModel({ source: server.url, dest, env: {}, retry: FAST_RETRY }),
    ).rejects.toMatchObject({ code: "access_denied", status: 403 });
    expect(server.requests.filter((r) => r.path.endsWith("config.json"))).toHaveLength(1);
  });

  it("retries a 503 and then succeeds", async () => {
    const server = await startModelServer({
      files: withSums(),
      override: (_req, res, path, count) => {
        if (!path.endsWith("model.onnx") || count > 2) return false;
        res.writeHead(503, { "retry-after": "0" }).end("busy");
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    const logger = memoryLogger();
    await fetchModel({ source: server.url, dest, env: {}, retry: FAST_RETRY, logger });
    expect(server.requests.filter((r) => r.path.endsWith("model.onnx"))).toHaveLength(3);
    expect(digests(await readTree(dest))["onnx/model.onnx"]).toBe(
      sha256(modelTree()["onnx/model.onnx"] as Buffer),
    );
    expect(logger.lines.some((l) => l.includes("attempt 1 failed"))).toBe(true);
  });

  it("gives up after the configured attempts of 5xx", async () => {
    const server = await startModelServer({
      files: withSums(),
      override: (_req, res, path) => {
        if (!path.endsWith("model.onnx")) return false;
        res.writeHead(500).end();
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    const error = (await fetchModel({ source: server.url, dest, env: {}, retry: FAST_RETRY }).catch(
      (e: unknown) => e,
    )) as FetchError;
    expect(error.code).toBe("download_failed");
    expect(error.message).toMatch(/model\.onnx.*HTTP 500.*after 3 attempts/);
    expect(await exists(dest)).toBe(false);
  });

  it("rejects a checksum mismatch, deletes the file from staging and leaves no dest", async () => {
    const tree = modelTree();
    const sums = sha256sums({ ...tree, "config.json": Buffer.from("something else") });
    const server = await startModelServer({ files: { ...tree, SHA256SUMS: Buffer.from(sums) } });
    const dest = join(await tempDir(), "tiny");
    const error = (await fetchModel({ source: server.url, dest, env: {} }).catch(
      (e: unknown) => e,
    )) as FetchError;
    expect(error.code).toBe("checksum_mismatch");
    expect(error.message).toContain("config.json");
    expect(error.message).toContain(sha256(Buffer.from("something else")));
    expect(error.message).toContain(sha256(tree["config.json"] as Buffer));
    expect(await exists(dest)).toBe(false);
    const staged = Object.keys(await readTree(`${dest}.partial`));
    expect(staged.filter((p) => p.endsWith("config.json"))).toEqual([]);
  });

  it("rejects a listing that names paths outside the destination", async () => {
    for (const evil of ["../escape.txt", "/etc/passwd", "onnx/../../escape.txt", "a\\b"]) {
      const payload = Buffer.from("pwned");
      const server = await startModelServer({
        files: { SHA256SUMS: Buffer.from(`${sha256(payload)}  ${evil}\n`) },
      });
      const root = await tempDir();
      const error = (await fetchModel({ source: server.url, dest: join(root, "m"), env: {} }).catch(
        (e: unknown) => e,
      )) as FetchError;
      expect(error.code, evil).toBe("unsafe_path");
      expect(Object.keys(await readTree(root))).toEqual([]);
      expect(server.requests.filter((r) => !r.path.endsWith("SHA256SUMS"))).toEqual([]);
    }
  });

  it("keeps a base URL's query string off logs and the marker", async () => {
    const server = await startModelServer({ files: withSums() });
    const dest = join(await tempDir(), "tiny");
    const logger = memoryLogger();
    const result = await fetchModel({
      source: `${server.url}?sig=SECRET123`,
      dest,
      env: {},
      logger,
    });
    expect(result.source).not.toContain("SECRET123");
    expect(logger.lines.join("\n")).not.toContain("SECRET123");
    expect((await readTree(dest))[MARKER_FILE]?.toString()).not.toContain("SECRET123");
  });

  it("logs per-file progress at most once per interval plus a summary", async () => {
    const server = await startModelServer({ files: withSums() });
    const dest = join(await tempDir(), "tiny");
    const logger = memoryLogger();
    await fetchModel({ source: server.url, dest, env: {}, logger, concurrency: 1 });
    const modelLines = logger.lines.filter((l) => l.startsWith("onnx/model.onnx "));
    expect(modelLines.length).toBeLessThanOrEqual(3);
    expect(modelLines.at(-1)).toMatch(/^onnx\/model\.onnx 293\.0 KiB\/293\.0 KiB \(100%\)/);
    expect(logger.lines.at(-1)).toMatch(/^fetched 4 files, .* in \d+\.\d s/);
  });
});
