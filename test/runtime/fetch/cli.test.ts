import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { parseFetchArgv, runFetchCommand } from "../../../runtime/fetch/cli.js";
import type { FetchResult } from "../../../runtime/fetch/fetch-model.js";
import {
  exists,
  memoryLogger,
  modelTree,
  sha256,
  sha256sums,
  tempDir,
  writeTree,
} from "./helpers.js";
import { startModelServer } from "./model-server.js";

function capture() {
  const lines: string[] = [];
  return { lines, stderr: { write: (line: string) => lines.push(line) } };
}

async function modelUri(): Promise<string> {
  const src = join(await tempDir(), "src");
  await writeTree(src, modelTree());
  return pathToFileURL(src).toString();
}

describe("runFetchCommand", () => {
  it("parses every flag, repeatable ones included", () => {
    expect(
      parseFetchArgv([
        "--source",
        "hf://org/name@v1",
        "--dest",
        "/models/x",
        "--revision",
        "main",
        "--sha256",
        "a=" + "0".repeat(64),
        "--sha256",
        "b=" + "1".repeat(64),
        "--checksums-file",
        "/tmp/SUMS",
        "--endpoint",
        "http://127.0.0.1:1",
        "--file",
        "config.json",
        "--ca-file",
        "/tmp/ca.pem",
      ]),
    ).toEqual({
      source: "hf://org/name@v1",
      dest: "/models/x",
      revision: "main",
      sha256: ["a=" + "0".repeat(64), "b=" + "1".repeat(64)],
      checksumsFile: "/tmp/SUMS",
      endpoint: "http://127.0.0.1:1",
      file: ["config.json"],
      caFile: "/tmp/ca.pem",
    });
  });

  it("fetches with argv and returns 0", async () => {
    const dest = join(await tempDir(), "tiny");
    const config = modelTree()["config.json"] as Buffer;
    let result: FetchResult | undefined;
    const code = await runFetchCommand(
      ["--source", await modelUri(), "--dest", dest, "--sha256", `config.json=${sha256(config)}`],
      { logger: memoryLogger(), env: {}, onResult: (r) => (result = r) },
    );
    expect(code).toBe(0);
    expect(result?.files).toHaveLength(3);
    expect(await exists(join(dest, "onnx", "model.onnx"))).toBe(true);
  });

  it("accepts already-parsed flags (the commander wiring)", async () => {
    const dest = join(await tempDir(), "tiny");
    const code = await runFetchCommand(
      { source: await modelUri(), dest },
      { logger: memoryLogger(), env: {} },
    );
    expect(code).toBe(0);
  });

  it("reads --checksums-file and fails with one line and exit 1 on a mismatch", async () => {
    const dir = await tempDir();
    const sumsFile = join(dir, "SUMS");
    await writeFile(sumsFile, sha256sums({ "config.json": Buffer.from("not it") }));
    const dest = join(dir, "tiny");
    const err = capture();
    const code = await runFetchCommand(
      ["--source", await modelUri(), "--dest", dest, "--checksums-file", sumsFile],
      { logger: memoryLogger(), env: {}, stderr: err.stderr },
    );
    expect(code).toBe(1);
    expect(err.lines).toHaveLength(1);
    expect(err.lines[0]).toMatch(
      /^modelgate runtime fetch: checksum_mismatch: config\.json: .*\n$/,
    );
    expect(await exists(dest)).toBe(false);
  });

  it("passes --file and --endpoint through", async () => {
    const server = await startModelServer({ files: modelTree() });
    const dest = join(await tempDir(), "tiny");
    const code = await runFetchCommand(
      ["--source", server.url, "--dest", dest, "--file", "config.json", "--file", "tokenizer.json"],
      { logger: memoryLogger(), env: {} },
    );
    expect(code).toBe(0);
    expect(await exists(join(dest, "tokenizer.json"))).toBe(true);
    expect(await exists(join(dest, "onnx"))).toBe(false);
  });

  it.each([
    [["--dest", "/tmp/x"], /invalid_fetch_options: --source/],
    [["--source", "gs://b/m", "--dest", "/tmp/x"], /unsupported_source_scheme: .*"gs:\/\/"/],
    [["--source", "file:///x", "--dest", "/tmp/x", "--bogus"], /invalid_fetch_options: .*bogus/],
    [["--source", "file:///x", "--dest", "/tmp/x", "--sha256", "nohash"], /invalid_checksums/],
  ])("reports bad usage %j on one line", async (argv, pattern) => {
    const err = capture();
    expect(
      await runFetchCommand(argv, { stderr: err.stderr, env: {}, logger: memoryLogger() }),
    ).toBe(1);
    expect(err.lines).toHaveLength(1);
    expect(err.lines[0]).toMatch(pattern);
  });
});
