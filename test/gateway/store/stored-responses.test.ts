import { createHash } from "node:crypto";
import type { KyselyPlugin } from "kysely";
import { describe, expect, it } from "vitest";
import { ResponseStore, sweepIntervalMs } from "../../../gateway/store/response-store.js";
import { openStore } from "../../../gateway/store/store.js";
import { onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "./engines.js";

const engines = useStoreEngines();
/** A byte bound no conversation here reaches. */
const ALL = 1 << 30;

/** A response id of the gateway's own form (resp_ and 48 hex digits), named for the test. */
const rid = (name: string) =>
  `resp_${createHash("sha256").update(name).digest("hex").slice(0, 48)}`;

/** Counts the INSERT statements run through the handle it is plugged into. */
function insertCounter() {
  const counter = { inserts: 0 };
  const plugin: KyselyPlugin = {
    transformQuery(args) {
      if (args.node.kind === "InsertQueryNode") counter.inserts++;
      return args.node;
    },
    transformResult: (args) => Promise.resolve(args.result),
  };
  return { counter, plugin };
}

/** A store of stored responses on a fresh database, with a clock the test moves. */
async function responseStore(engine: (typeof engines)[number], retentionSeconds = 60) {
  const store = await openStore(await engine.newTarget());
  onCleanup(() => store.close());
  const clock = { now: Date.UTC(2026, 10, 25, 12) };
  const { counter, plugin } = insertCounter();
  const db = store.db.withPlugin(plugin);
  const responses = new ResponseStore({
    db: () => Promise.resolve(db),
    retentionSeconds,
    now: () => clock.now,
  });
  return { store, clock, responses, counter };
}

const turn = (id: string, previous: string | null, owner = "key:acme/") => ({
  id,
  owner,
  model: "tiny-gpt",
  previousResponseId: previous,
  inputItems: JSON.stringify([{ id: `msg_${id}`, role: "user", content: [] }]),
  response: JSON.stringify({ id, object: "response" }),
  servedBy: "http://10.0.0.7:8000",
});

describe.each(engines)("stored responses on $name", (engine) => {
  it("reads back what was saved, to its owner only, with the endpoint that served it", async () => {
    const { responses } = await responseStore(engine);
    await responses.save(turn(rid("a"), null));
    const row = await responses.get(rid("a"), "key:acme/");
    expect(row).toMatchObject({
      id: rid("a"),
      response: JSON.stringify({ id: rid("a"), object: "response" }),
      servedBy: "http://10.0.0.7:8000",
      previousResponseId: null,
    });
    expect(await responses.get(rid("a"), "key:acme/web")).toBeNull();
    expect(await responses.get(rid("a"), "pay:k1")).toBeNull();
    expect(await responses.delete(rid("a"), "pay:k1")).toBe(false);
    expect(await responses.delete(rid("a"), "key:acme/")).toBe(true);
    expect(await responses.get(rid("a"), "key:acme/")).toBeNull();
  });

  it("writes the saves asked for together in one INSERT, each readable once its save resolved", async () => {
    const { responses, counter } = await responseStore(engine);
    const ids = [rid("b1"), rid("b2"), rid("b3"), rid("b4"), rid("b5")];
    await Promise.all(ids.map((id) => responses.save(turn(id, null))));
    expect(counter.inserts).toBe(1);
    for (const id of ids) {
      expect((await responses.get(id, "key:acme/"))?.response).toBe(
        JSON.stringify({ id, object: "response" }),
      );
    }
    // Apart, each save is its own statement.
    await responses.save(turn(rid("c1"), null));
    await responses.save(turn(rid("c2"), null));
    expect(counter.inserts).toBe(3);
  });

  it("fails only the bad row of a shared INSERT; the others are stored", async () => {
    const { responses } = await responseStore(engine);
    await responses.save(turn(rid("dup"), null));
    const outcomes = await Promise.allSettled([
      responses.save(turn(rid("ok1"), null)),
      responses.save(turn(rid("dup"), null, "pay:k1")),
      responses.save(turn(rid("ok2"), null)),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(await responses.get(rid("ok1"), "key:acme/")).not.toBeNull();
    expect(await responses.get(rid("ok2"), "key:acme/")).not.toBeNull();
    // The first save of the id stands; the refused one wrote nothing.
    expect(await responses.get(rid("dup"), "key:acme/")).not.toBeNull();
    expect(await responses.get(rid("dup"), "pay:k1")).toBeNull();
  });

  it("follows previous_response_id oldest first, within the owner, stopping at a gap", async () => {
    const { responses } = await responseStore(engine);
    await responses.save(turn(rid("1"), null));
    await responses.save(turn(rid("2"), rid("1")));
    await responses.save(turn(rid("3"), rid("2")));
    // Another owner's row that claims to continue resp_3 is not part of its chain.
    await responses.save(turn(rid("x"), rid("3"), "pay:k1"));
    const ids = async (id: string, owner = "key:acme/") =>
      (await responses.conversation(id, owner, ALL))?.turns.map((r) => r.id);
    expect(await ids(rid("3"))).toEqual([rid("1"), rid("2"), rid("3")]);
    expect(await responses.conversation(rid("x"), "key:acme/", ALL)).toBeNull();
    expect(await ids(rid("x"), "pay:k1")).toEqual([rid("x")]);
    await responses.delete(rid("2"), "key:acme/");
    expect(await ids(rid("3"))).toEqual([rid("3")]);
  });

  it("reads back the newest turns up to the bytes asked for, and says when older ones are left", async () => {
    const { responses } = await responseStore(engine);
    const names = ["1", "2", "3", "4", "5"];
    for (const [i, name] of names.entries()) {
      await responses.save(turn(rid(name), i === 0 ? null : rid(names[i - 1]!)));
    }
    // Every turn stores the same number of bytes (ids are of one length).
    const one = turn(rid("1"), null);
    const size = Buffer.byteLength(one.inputItems) + Buffer.byteLength(one.response);
    const read = async (maxBytes: number) => {
      const conversation = await responses.conversation(rid("5"), "key:acme/", maxBytes);
      return [conversation?.turns.map((r) => r.id), conversation?.olderUnread];
    };
    // Up to and including the turn that reaches the bound.
    expect(await read(Math.floor(2.5 * size))).toEqual([[rid("3"), rid("4"), rid("5")], true]);
    expect(await read(size)).toEqual([[rid("5")], true]);
    // The bound reached on the first turn: nothing older is left unread.
    expect(await read(5 * size)).toEqual([names.map(rid), false]);
    expect(await read(ALL)).toEqual([names.map(rid), false]);
    // The turn before the bound is gone: the chain ended there anyway.
    await responses.delete(rid("2"), "key:acme/");
    expect(await read(Math.floor(2.5 * size))).toEqual([[rid("3"), rid("4"), rid("5")], false]);
  });

  it("hides an expired row at once and the sweeper deletes it", async () => {
    const { responses, clock, store } = await responseStore(engine, 2);
    await responses.save(turn(rid("old"), null));
    clock.now += 1000;
    await responses.save(turn(rid("new"), null));
    expect(await responses.sweep()).toBe(0);
    clock.now += 1500;
    expect(await responses.get(rid("old"), "key:acme/")).toBeNull();
    expect(await responses.get(rid("new"), "key:acme/")).not.toBeNull();
    expect(await responses.sweep()).toBe(1);
    const left = await store.db.selectFrom("stored_responses").select("id").execute();
    expect(left.map((r) => r.id)).toEqual([rid("new")]);
  });

  it("sweeps on its own at the interval it is given", async () => {
    const { responses, clock, store } = await responseStore(engine, 1);
    await responses.save(turn(rid("gone"), null));
    clock.now += 1001;
    responses.startSweeping(20, (error) => {
      throw error;
    });
    onCleanup(() => responses.stopSweeping());
    await expect
      .poll(
        async () => (await store.db.selectFrom("stored_responses").selectAll().execute()).length,
      )
      .toBe(0);
  });
});

describe("the sweeper", () => {
  /** A store whose sweeps are `sweep`, started at a 5 ms interval; no database is asked. */
  function sweeping(sweep: () => Promise<number>): ResponseStore {
    const responses = new ResponseStore({
      db: () => new Promise(() => {}),
      retentionSeconds: 60,
      now: Date.now,
    });
    responses.sweep = sweep;
    responses.startSweeping(5, (error) => {
      throw error;
    });
    onCleanup(() => responses.stopSweeping());
    return responses;
  }

  it("never starts a sweep while the last one is still running", async () => {
    let running = 0;
    let most = 0;
    let started = 0;
    sweeping(async () => {
      started++;
      most = Math.max(most, ++running);
      await new Promise((resolve) => setTimeout(resolve, 60));
      running--;
      return 0;
    });
    await expect.poll(() => started, { timeout: 5000 }).toBeGreaterThanOrEqual(3);
    expect(most).toBe(1);
  });

  it("stops after stopSweeping, even with a sweep in flight", async () => {
    let started = 0;
    let finish: () => void = () => {};
    const responses = sweeping(() => {
      started++;
      return new Promise((resolve) => (finish = () => resolve(0)));
    });
    await expect.poll(() => started).toBe(1);
    responses.stopSweeping();
    finish();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(started).toBe(1);
  });
});

describe("sweep interval", () => {
  it("is a tenth of the retention, between a second and an hour", () => {
    expect(sweepIntervalMs(30 * 24 * 3600)).toBe(3_600_000);
    expect(sweepIntervalMs(600)).toBe(60_000);
    expect(sweepIntervalMs(2)).toBe(1000);
  });
});

describe("a save on the answer path", () => {
  const entry = turn(rid("t"), null);

  it("gives up after its timeout when the database does not answer", async () => {
    const responses = new ResponseStore({
      db: () => new Promise(() => {}),
      retentionSeconds: 60,
      now: Date.now,
      saveTimeoutMs: 50,
    });
    const started = performance.now();
    await expect(responses.save(entry)).rejects.toThrow(/did not answer/);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it("fails at once, without asking for the database, while it is known to be down", async () => {
    let asked = 0;
    const responses = new ResponseStore({
      db: () => {
        asked++;
        return new Promise(() => {});
      },
      retentionSeconds: 60,
      now: Date.now,
      down: () => true,
    });
    await expect(responses.save(entry)).rejects.toThrow(/down/);
    expect(asked).toBe(0);
  });
});
