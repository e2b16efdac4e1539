import { execFile } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { progressLine } from "../../../cli/batch-command.js";
import { REPO_ROOT } from "../../support/cluster.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { gptLine, jsonlOf, nliLine, type OutputLine } from "./support.js";

/**
 * `modelgate batch submit | watch | results` as an operator runs them: the
 * real CLI in a child process against a listening gateway whose worker runs
 * the lines on real runtimes.
 */
const run = promisify(execFile);
let p: Platform;
let dir: string;
beforeAll(async () => {
  p = await startPlatform({ withoutPayments: true, config: { batchPollMs: 50, batchWorkers: 2 } });
  dir = await mkdtemp(join(tmpdir(), "batch-cli-"));
});
afterAll(async () => p?.close());

async function modelgate(
  args: string[],
  key = p.keys.acme.key,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      ["--import", "tsx", join(REPO_ROOT, "cli", "modelgate.ts"), "batch", ...args],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, MODELGATE_BASE_URL: p.url, MODELGATE_API_KEY: key },
        timeout: 60_000,
      },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

const parse = (text: string) =>
  text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as OutputLine);

describe("modelgate batch", () => {
  it("submits a file, watches it to the end and writes its output and error lines", async () => {
    const input = join(dir, "in.jsonl");
    await writeFile(
      input,
      jsonlOf([
        nliLine(1),
        gptLine(2),
        nliLine(3),
        // The runtime refuses it (over maxTokens): a line of the error file.
        { custom_id: "too-long", body: { model: "tiny-gpt", input: "x".repeat(400) } },
      ]),
    );
    const submitted = await modelgate(["submit", input, "--metadata", "job=cli"]);
    expect(submitted.stderr).toMatch(/uploaded .*in\.jsonl: file-[0-9a-f]+ \(\d+ bytes\)/);
    expect(submitted.code).toBe(0);
    const id = submitted.stdout.trim();
    expect(id).toMatch(/^batch_[0-9a-f]{24}$/);

    const watched = await modelgate(["watch", id, "--interval-ms", "100"]);
    expect(watched.code).toBe(0);
    const last = watched.stderr.trim().split("\n").at(-1)!;
    expect(last).toBe(`${id} [${"#".repeat(30)}] 100% 4/4 (completed 3, failed 1) completed`);

    const out = join(dir, "out.jsonl");
    const errors = join(dir, "errors.jsonl");
    const results = await modelgate(["results", id, "--out", out, "--errors", errors]);
    expect(results.code).toBe(0);
    expect(results.stderr).toContain(`batch ${id}: completed, 3 completed, 1 failed`);
    const output = parse(await readFile(out, "utf8"));
    expect(output.map((line) => line.custom_id)).toEqual(["nli-1", "gpt-2", "nli-3"]);
    expect(output.every((line) => line.response?.status_code === 200)).toBe(true);
    const failed = parse(await readFile(errors, "utf8"));
    expect(failed.map((line) => line.custom_id)).toEqual(["too-long"]);

    // Without --out the output lines go to stdout, and the error file is only named.
    const toStdout = await modelgate(["results", id]);
    expect(parse(toStdout.stdout).map((line) => line.custom_id)).toEqual([
      "nli-1",
      "gpt-2",
      "nli-3",
    ]);
    expect(toStdout.stderr).toContain("has an error file");
  }, 120_000);

  it("a batch that fails validation: watch lists the lines and exits 1", async () => {
    const input = join(dir, "bad.jsonl");
    await writeFile(input, jsonlOf([nliLine(1), "{not json", nliLine(1)]));
    const submitted = await modelgate(["submit", input]);
    expect(submitted.code).toBe(0);
    const watched = await modelgate(["watch", submitted.stdout.trim(), "--interval-ms", "100"]);
    expect(watched.code).toBe(1);
    expect(watched.stderr).toContain("failed");
    expect(watched.stderr).toContain("line 2: invalid_json_line");
    expect(watched.stderr).toContain("line 3: duplicate_custom_id");
    const results = await modelgate(["results", submitted.stdout.trim()]);
    expect(results.code).toBe(1);
    expect(results.stderr).toContain("it has no results");
  }, 120_000);

  it("says what the gateway said: a wrong key, a batch it does not know, no key at all", async () => {
    const wrongKey = await modelgate(["watch", "batch_000000000000000000000000"], "mg_nope");
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toMatch(/^modelgate batch watch: GET \/v1\/batches\/\S+: 401 /);
    const missing = await modelgate(["results", "batch_000000000000000000000000"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(": 404 ");
    const noKey = await modelgate(["submit", join(dir, "in.jsonl")], "");
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain("no API key");
  }, 60_000);
});

describe("the progress bar", () => {
  it("fills with finished lines, completed and failed alike", () => {
    const view = (completed: number, failed: number, total: number, status = "in_progress") => ({
      id: "batch_1",
      status,
      output_file_id: null,
      error_file_id: null,
      errors: null,
      request_counts: { total, completed, failed },
    });
    expect(progressLine(view(0, 0, 0, "validating"), 10)).toBe(
      "batch_1 [----------]   0% 0/0 (completed 0, failed 0) validating",
    );
    expect(progressLine(view(30, 10, 80), 10)).toBe(
      "batch_1 [#####-----]  50% 40/80 (completed 30, failed 10) in_progress",
    );
    expect(progressLine(view(79, 0, 80), 10)).toBe(
      "batch_1 [##########]  98% 79/80 (completed 79, failed 0) in_progress",
    );
  });
});
