import type { KyselyPlugin } from "kysely";
import { describe, expect, it } from "vitest";
import { ResponseStore, sweepIntervalMs } from "../../../gateway/store/response-store.js";
import { openStore } from "../../../gateway/store/store.js";
import { onCleanup } from "../outbox/support.js";
import { useStoreEngines } from "./engines.js";

const engines = useStoreEngines();

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
    await responses.save(turn("resp_a", null));
    const row = await responses.get("resp_a", "key:acme/");
    expect(row).toMatchObject({
      id: "resp_a",
      response: '{"id":"resp_a","object":"response"}',
      servedBy: "http://10.0.0.7:8000",
      previousResponseId: null,
    });
    expect(await responses.get("resp_a", "key:acme/web")).toBeNull();
    expect(await responses.get("resp_a", "pay:k1")).toBeNull();
    expect(await responses.delete("resp_a", "pay:k1")).toBe(false);
    expect(await responses.delete("resp_a", "key:acme/")).toBe(true);
    expect(await responses.get("resp_a", "key:acme/")).toBeNull();
  });

  it("writes the saves asked for together in one INSERT, each readable once its save resolved", async () => {
    const { responses, counter } = await responseStore(engine);
    const ids = ["resp_b1", "resp_b2", "resp_b3", "resp_b4", "resp_b5"];
    await Promise.all(ids.map((id) => responses.save(turn(id, null))));
    expect(counter.inserts).toBe(1);
    for (const id of ids) {
      expect((await responses.get(id, "key:acme/"))?.response).toBe(
        JSON.stringify({ id, object: "response" }),
      );
    }
    // Apart, each save is its own statement.
    await responses.save(turn("resp_c1", null));
    await responses.save(turn("resp_c2", null));
    expect(counter.inserts).toBe(3);
  });

  it("fails only the bad row of a shared INSERT; the others are stored", async () => {
    const { responses } = await responseStore(engine);
    await responses.save(turn("resp_dup", null));
    const outcomes = await Promise.allSettled([
      responses.save(turn("resp_ok1", null)),
      responses.save(turn("resp_dup", null, "pay:k1")),
      responses.save(turn("resp_ok2", null)),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(await responses.get("resp_ok1", "key:acme/")).not.toBeNull();
    expect(await responses.get("resp_ok2", "key:acme/")).not.toBeNull();
    // The first save of the id stands; the refused one wrote nothing.
    expect(await responses.get("resp_dup", "key:acme/")).not.toBeNull();
    expect(await responses.get("resp_dup", "pay:k1")).toBeNull();
  });

  it("follows previous_response_id oldest first, within the owner, stopping at a gap", async () => {
    const { responses } = await responseStore(engine);
    await responses.save(turn("resp_1", null));
    await responses.save(turn("resp_2", "resp_1"));
    await responses.save(turn("resp_3", "resp_2"));
    // Another owner's row that claims to continue resp_3 is not part of its chain.
    await responses.save(turn("resp_x", "resp_3", "pay:k1"));
    const chain = await responses.conversation("resp_3", "key:acme/");
    expect(chain?.map((r) => r.id)).toEqual(["resp_1", "resp_2", "resp_3"]);
    expect(await responses.conversation("resp_x", "key:acme/")).toBeNull();
    expect((await responses.conversation("resp_x", "pay:k1"))?.map((r) => r.id)).toEqual([
      "resp_x",
    ]);
    await responses.delete("resp_2", "key:acme/");
    expect((await responses.conversation("resp_3", "key:acme/"))?.map((r) => r.id)).toEqual([
      "resp_3",
    ]);
  });

  it("hides an expired row at once and the sweeper deletes it", async () => {
    const { responses, clock, store } = await responseStore(engine, 2);
    await responses.save(turn("resp_old", null));
    clock.now += 1000;
    await responses.save(turn("resp_new", null));
    expect(await responses.sweep()).toBe(0);
    clock.now += 1500;
    expect(await responses.get("resp_old", "key:acme/")).toBeNull();
    expect(await responses.get("resp_new", "key:acme/")).not.toBeNull();
    expect(await responses.sweep()).toBe(1);
    const left = await store.db.selectFrom("stored_responses").select("id").execute();
    expect(left.map((r) => r.id)).toEqual(["resp_new"]);
  });

  it("sweeps on its own at the interval it is given", async () => {
    const { responses, clock, store } = await responseStore(engine, 1);
    await responses.save(turn("resp_gone", null));
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

describe("sweep interval", () => {
  it("is a tenth of the retention, between a second and an hour", () => {
    expect(sweepIntervalMs(30 * 24 * 3600)).toBe(3_600_000);
    expect(sweepIntervalMs(600)).toBe(60_000);
    expect(sweepIntervalMs(2)).toBe(1000);
  });
});

describe("a save on the answer path", () => {
  const entry = turn("resp_t", null);

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
