import type { Kysely } from "kysely";
import { afterEach, describe, expect, it, vi } from "vitest";
import { storeCalls } from "../../../gateway/store/store-calls.js";
import type { Database } from "../../../gateway/store/database.js";
import { answerWithin } from "../../../gateway/store/answer-within.js";
import { StoreUnreachableError } from "../../../gateway/store/store-unreachable.js";

/** The deadline logic alone, on fake timers: no database is needed to decide. */
afterEach(() => {
  vi.useRealTimers();
});

const never = () => new Promise<never>(() => undefined);

describe("answerWithin", () => {
  it("refuses at once while the store is known down, without starting the work", async () => {
    const work = vi.fn(() => Promise.resolve(1));
    await expect(answerWithin(work, { down: () => true, undone: "not read" })).rejects.toThrow(
      StoreUnreachableError,
    );
    expect(work).not.toHaveBeenCalled();
  });

  it("gives up after the deadline and marks the store unreachable", async () => {
    vi.useFakeTimers();
    const unreachable = vi.fn();
    const answer = answerWithin(never, { timeoutMs: 5000, unreachable, undone: "not read" });
    const settled = expect(answer).rejects.toThrow(/did not answer in time: not read/);
    await vi.advanceTimersByTimeAsync(4999);
    expect(unreachable).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    await settled;
    expect(unreachable).toHaveBeenCalledTimes(1);
  });

  it("leaves the work's later failure handled once it gave up on it", async () => {
    vi.useFakeTimers();
    let fail!: (error: Error) => void;
    const work = () => new Promise<never>((_resolve, reject) => (fail = reject));
    const answer = answerWithin(work, { timeoutMs: 10, undone: "not read" });
    const settled = expect(answer).rejects.toThrow(StoreUnreachableError);
    await vi.advanceTimersByTimeAsync(10);
    await settled;
    // Unhandled, this would fail the run.
    fail(new Error("connection terminated later"));
  });

  it("without a deadline waits, and marks only a failure that means the store is away", async () => {
    vi.useFakeTimers();
    const unreachable = vi.fn();
    let answer!: (value: number) => void;
    const waited = answerWithin(() => new Promise<number>((resolve) => (answer = resolve)), {
      unreachable,
      undone: "not written",
    });
    await vi.advanceTimersByTimeAsync(60_000);
    answer(7);
    await expect(waited).resolves.toBe(7);

    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    await expect(
      answerWithin(() => Promise.reject(refused), { unreachable, undone: "x" }),
    ).rejects.toBe(refused);
    const wrong = Object.assign(new Error("syntax"), { code: "42601" });
    await expect(
      answerWithin(() => Promise.reject(wrong), { unreachable, undone: "x" }),
    ).rejects.toBe(wrong);
    expect(unreachable).toHaveBeenCalledTimes(1);
    expect(unreachable).toHaveBeenCalledWith(refused);
  });
});

describe("storeCalls", () => {
  const db = {} as Kysely<Database>;

  it("bounds a read by the deadline, not a write", async () => {
    vi.useFakeTimers();
    const calls = storeCalls({ db: () => Promise.resolve(db), readTimeoutMs: 100 });
    const read = calls.read(never);
    const readRefused = expect(read).rejects.toThrow(StoreUnreachableError);
    let written = false;
    void calls.write(never).finally(() => (written = true));
    await vi.advanceTimersByTimeAsync(10_000);
    await readRefused;
    expect(written).toBe(false);
  });

  it("answers a store that cannot be opened as store_unavailable", async () => {
    const calls = storeCalls({ db: () => Promise.reject(new Error("migration failed")) });
    await expect(calls.read(() => Promise.resolve(1))).rejects.toMatchObject({
      code: "store_unavailable",
    });
    await expect(calls.write(() => Promise.resolve(1))).rejects.toMatchObject({
      code: "store_unavailable",
    });
  });

  it("refuses a read and a write at once while the store is known down", async () => {
    const open = vi.fn(() => Promise.resolve(db));
    const calls = storeCalls({ db: open, down: () => true });
    await expect(calls.read(() => Promise.resolve(1))).rejects.toThrow(StoreUnreachableError);
    await expect(calls.write(() => Promise.resolve(1))).rejects.toThrow(StoreUnreachableError);
    expect(open).not.toHaveBeenCalled();
  });
});
