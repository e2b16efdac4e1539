import { spawn } from "node:child_process";
import { constants } from "node:fs";
import { readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseGatewayConfig } from "../../../gateway/config.js";
import { DurableOutbox } from "../../../gateway/outbox/durable-outbox.js";
import type { JournalSync } from "../../../gateway/outbox/journal-file.js";
import { fastRetry, logs, onCleanup, outboxDir } from "./support.js";

/** The open flags of this process's descriptor for `path`, as the kernel reports them. */
async function openFlags(path: string): Promise<number> {
  for (const fd of await readdir("/proc/self/fd")) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => "");
    if (target !== path) continue;
    const info = await readFile(`/proc/self/fdinfo/${fd}`, "utf8");
    return Number.parseInt(/^flags:\s+([0-7]+)$/m.exec(info)![1]!, 8);
  }
  throw new Error(`${path} is not open`);
}

/** An outbox over `dir` (default: a new folder) that never delivers, opened. */
async function openOutbox(journalSync?: JournalSync, dir?: string) {
  dir ??= await outboxDir();
  const outbox = new DurableOutbox<{ n: number }>({
    dir,
    name: "usage",
    send: () => Promise.reject(new Error("not delivered in this test")),
    retry: fastRetry,
    logger: logs().logger,
    ...(journalSync ? { journalSync } : {}),
  });
  onCleanup(() => outbox.close());
  await outbox.open();
  return { outbox, file: (kind: string) => join(dir, `usage.${kind}.jsonl`) };
}

/** Runs crash-child.ts: `count` appends, then SIGKILL right after the last one resolved. */
async function appendThenKill(dir: string, count: number, sync: string): Promise<void> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "crash-child.ts"), dir, String(count), sync],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const signal = await new Promise<string | null>((resolve) =>
    child.once("exit", (_code, signal) => resolve(signal)),
  );
  if (signal !== "SIGKILL") throw new Error(`crash child did not die by SIGKILL: ${stderr}`);
}

describe("journal sync", () => {
  it("by default writes records with O_DSYNC (on disk before append resolves); acks never synced", async () => {
    const { file } = await openOutbox();
    expect((await openFlags(file("records"))) & constants.O_DSYNC).toBe(constants.O_DSYNC);
    expect((await openFlags(file("dead"))) & constants.O_DSYNC).toBe(constants.O_DSYNC);
    expect((await openFlags(file("acks"))) & constants.O_DSYNC).toBe(0);
  });

  it("with an interval, writes records without O_DSYNC; dead letters still sync always", async () => {
    const { outbox, file } = await openOutbox({ everyMs: 20 });
    expect((await openFlags(file("records"))) & constants.O_DSYNC).toBe(0);
    expect((await openFlags(file("dead"))) & constants.O_DSYNC).toBe(constants.O_DSYNC);
    await outbox.append("req_1", { n: 1 });
    // Written when append resolves: readable by anyone, before any sync.
    expect(await readFile(file("records"), "utf8")).toContain('"key":"req_1"');
    // Past the interval the background sync has run; the journal still appends.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await outbox.append("req_2", { n: 2 });
    await outbox.close();
    expect((await readFile(file("records"), "utf8")).trim().split("\n")).toHaveLength(2);
  });

  it.each([
    ["always", "always"],
    ["a 60 s interval (no sync ever runs before the kill)", "60000"],
  ])(
    "a process killed right after its appends resolved loses none of them: %s",
    async (_what, sync) => {
      const dir = await outboxDir();
      await appendThenKill(dir, 50, sync);
      const { outbox: next } = await openOutbox(undefined, dir);
      expect(next.pending()).toBe(50);
    },
  );
});

describe("--journal-sync", () => {
  const parse = (journalSync?: string) =>
    parseGatewayConfig(journalSync === undefined ? {} : { journalSync }, {}).journalSync;

  it("defaults to a background sync every 100 ms, and takes always or ms and s durations", () => {
    expect(parse()).toEqual({ everyMs: 100 });
    expect(parse("always")).toBe("always");
    expect(parse("250ms")).toEqual({ everyMs: 250 });
    expect(parse("2s")).toEqual({ everyMs: 2000 });
    expect(parseGatewayConfig({}, { MODELGATE_JOURNAL_SYNC: "always" }).journalSync).toBe("always");
  });

  it.each([
    ["never", "must be always, or a duration such as 100ms or 1s"],
    ["0ms", "must be always, or a duration such as 100ms or 1s"],
    ["1.5s", "must be always, or a duration such as 100ms or 1s"],
    ["61s", "must be at most 60s"],
  ])("refuses %s, naming the flag and the variable", (value, reason) => {
    expect(() => parse(value)).toThrow(
      `invalid setting journalSync (--journal-sync / MODELGATE_JOURNAL_SYNC): ${reason}`,
    );
  });
});
