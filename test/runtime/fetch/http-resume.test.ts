import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { fetchModel } from "../../../runtime/fetch/fetch-model.js";
import { stagingFor } from "../../../runtime/fetch/staging.js";
import {
  FAST_RETRY,
  exists,
  fileDigest,
  memoryLogger,
  modelTree,
  sha256,
  sha256sums,
  tempDir,
} from "./helpers.js";
import { cutAfter, startModelServer } from "./model-server.js";

const tree = modelTree();
const model = tree["onnx/model.onnx"] as Buffer;
const files = { ...tree, SHA256SUMS: Buffer.from(sha256sums(tree)) };
const HALF = 120_000;

const modelRequests = (server: { requests: { path: string; range: string | undefined }[] }) =>
  server.requests.filter((r) => r.path.endsWith("onnx/model.onnx"));

describe("resumable http downloads", () => {
  it("resumes with a Range request after the connection is cut mid-file", async () => {
    const server = await startModelServer({
      files,
      override: (_req, res, path, count) => {
        if (!path.endsWith("onnx/model.onnx") || count > 1) return false;
        cutAfter(res, model, HALF);
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    const logger = memoryLogger();
    const result = await fetchModel({
      source: server.url,
      dest,
      env: {},
      retry: FAST_RETRY,
      logger,
    });

    const requests = modelRequests(server);
    expect(requests.map((r) => r.range)).toEqual([undefined, `bytes=${HALF}-`]);
    expect(await fileDigest(join(dest, "onnx/model.onnx"))).toBe(sha256(model));
    // Each byte crossed the network once: the second request asked only for the rest.
    const total = Object.values(files).reduce((n, b) => n + b.length, 0);
    expect(result.bytesDownloaded).toBe(total);
    expect(logger.lines.some((l) => l.includes("retrying"))).toBe(true);
  });

  it("resumes in a later run from the partial bytes kept in staging", async () => {
    let cut = true;
    const server = await startModelServer({
      files,
      override: (_req, res, path) => {
        if (!path.endsWith("onnx/model.onnx") || !cut) return false;
        cutAfter(res, model, HALF);
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    const once = { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 };
    await expect(
      fetchModel({ source: server.url, dest, env: {}, retry: once }),
    ).rejects.toMatchObject({ code: "download_failed" });
    expect(await exists(dest)).toBe(false);
    const partial = stagingFor(dest).partialPath("onnx/model.onnx");
    expect((await readFile(partial)).length).toBe(HALF);

    cut = false;
    const result = await fetchModel({ source: server.url, dest, env: {}, retry: once });
    expect(modelRequests(server).at(-1)?.range).toBe(`bytes=${HALF}-`);
    expect(await fileDigest(join(dest, "onnx/model.onnx"))).toBe(sha256(model));
    // Finished files of the first run are reused, not downloaded again.
    expect(server.requests.filter((r) => r.path.endsWith("config.json"))).toHaveLength(1);
    expect(result.bytesDownloaded).toBe(model.length - HALF);
    expect(await exists(`${dest}.partial`)).toBe(false);
  });

  it("starts the file over when the server ignores Range and answers 200", async () => {
    const server = await startModelServer({ files, ranges: false });
    const dest = join(await tempDir(), "tiny");
    const partial = stagingFor(dest).partialPath("onnx/model.onnx");
    await seedStaging(dest, server.url, partial, model.subarray(0, HALF));

    await fetchModel({ source: server.url, dest, env: {} });
    expect(modelRequests(server).map((r) => r.range)).toEqual([`bytes=${HALF}-`]);
    expect(await fileDigest(join(dest, "onnx/model.onnx"))).toBe(sha256(model));
  });

  it("treats 416 for a complete partial file as done", async () => {
    const server = await startModelServer({ files });
    const dest = join(await tempDir(), "tiny");
    const partial = stagingFor(dest).partialPath("onnx/model.onnx");
    await seedStaging(dest, server.url, partial, model);

    const result = await fetchModel({ source: server.url, dest, env: {} });
    expect(modelRequests(server).map((r) => r.range)).toEqual([`bytes=${model.length}-`]);
    expect(await fileDigest(join(dest, "onnx/model.onnx"))).toBe(sha256(model));
    expect(result.bytesDownloaded).toBeLessThan(model.length);
  });

  it("throws away partial bytes that fail the checksum, so the next run starts clean", async () => {
    const server = await startModelServer({ files });
    const dest = join(await tempDir(), "tiny");
    const partial = stagingFor(dest).partialPath("onnx/model.onnx");
    const wrong = Buffer.from(model.subarray(0, HALF));
    wrong[10] = (wrong[10] ?? 0) ^ 0xff;
    await seedStaging(dest, server.url, partial, wrong);

    await expect(fetchModel({ source: server.url, dest, env: {} })).rejects.toMatchObject({
      code: "checksum_mismatch",
    });
    expect(await exists(partial)).toBe(false);
    await fetchModel({ source: server.url, dest, env: {} });
    expect(modelRequests(server).map((r) => r.range)).toEqual([`bytes=${HALF}-`, undefined]);
    expect(await fileDigest(join(dest, "onnx/model.onnx"))).toBe(sha256(model));
  });

  it("starts over when a 206 answer does not start where asked", async () => {
    const server = await startModelServer({
      files,
      override: (_req, res, path, count) => {
        if (!path.endsWith("onnx/model.onnx") || count > 1) return false;
        res.writeHead(206, {
          "content-range": `bytes 0-${model.length - 1}/${model.length}`,
          "content-length": model.length,
        });
        res.end(model);
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    await seedStaging(
      dest,
      server.url,
      stagingFor(dest).partialPath("onnx/model.onnx"),
      model.subarray(0, HALF),
    );
    await fetchModel({ source: server.url, dest, env: {}, retry: FAST_RETRY });
    expect(await fileDigest(join(dest, "onnx/model.onnx"))).toBe(sha256(model));
  });

  it("stops on abort, keeps partial bytes and leaves no dest", async () => {
    const server = await startModelServer({
      files,
      override: (_req, res, path) => {
        if (!path.endsWith("onnx/model.onnx")) return false;
        // Half the file, then silence: only the abort can end this.
        res.writeHead(200, { "content-length": model.length });
        res.write(model.subarray(0, HALF));
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    const controller = new AbortController();
    const result = fetchModel({
      source: server.url,
      dest,
      env: {},
      signal: controller.signal,
      progressIntervalMs: 0,
      onProgress: (e) => {
        if (e.type === "file" && e.path === "onnx/model.onnx" && e.bytes >= HALF)
          controller.abort();
      },
    });
    await expect(result).rejects.toMatchObject({ code: "fetch_aborted" });
    expect(await exists(dest)).toBe(false);
    expect((await readFile(stagingFor(dest).partialPath("onnx/model.onnx"))).length).toBe(HALF);
  });

  it("stops the other downloads when one file fails for good", async () => {
    const server = await startModelServer({
      files,
      override: (_req, res, path) => {
        if (path.endsWith("onnx/model.onnx")) {
          res.writeHead(200, { "content-length": model.length });
          res.write(model.subarray(0, HALF));
          return true;
        }
        if (!path.endsWith("config.json")) return false;
        res.writeHead(404).end();
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    const started = Date.now();
    await expect(
      fetchModel({ source: server.url, dest, env: {}, concurrency: 4 }),
    ).rejects.toMatchObject({ code: "source_not_found" });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await exists(dest)).toBe(false);
  });
});

/**
 * Puts partial bytes where an interrupted run of the same source would have
 * left them, with the staging identity that run would have written.
 */
async function seedStaging(
  dest: string,
  source: string,
  partial: string,
  data: Buffer,
): Promise<void> {
  const staging = stagingFor(dest);
  await mkdir(dirname(partial), { recursive: true });
  await writeFile(partial, data);
  await writeFile(
    join(staging.dir, ".modelgate-staging", "identity.json"),
    JSON.stringify({ source, revision: undefined }),
  );
}
