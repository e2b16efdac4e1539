import { describe, expect, it } from "vitest";
import { componentOf, splitProfile } from "./cpu-split.js";

const root = "file:///repo/";
const frame = (functionName: string, url: string) => ({ functionName, url });

describe("the gateway benchmark's CPU split", () => {
  it("gives a sample to the first component from its leaf up, else ours, Node's or the GC", () => {
    const reply = frame("send", "file:///repo/node_modules/fastify/lib/reply.js");
    const write = frame("writev", "");
    const net = frame("Socket._writev", "node:net");
    const handler = frame("handler", "file:///repo/gateway/routes/inference.handler.ts");
    // A socket write under Fastify's reply is Fastify's.
    expect(componentOf([write, net, reply, handler], root)).toBe("fastify");
    // A file write under the journal is the journal's, not Node's.
    expect(
      componentOf(
        [
          write,
          frame("writeSync", "node:fs"),
          frame("flush", `${root}gateway/outbox/journal-file.ts`),
        ],
        root,
      ),
    ).toBe("journal (outbox)");
    expect(componentOf([frame("wasm-function[12]", "wasm://wasm/0a1b"), handler], root)).toBe(
      "ledger (PGlite, kysely, store)",
    );
    expect(componentOf([frame("responseIdOf", `${root}gateway/plugins/request-id.ts`)], root)).toBe(
      "gateway hooks and handler (ours)",
    );
    expect(componentOf([write, net], root)).toBe("node (HTTP, sockets, timers, promises)");
    expect(componentOf([frame("(garbage collector)", "")], root)).toBe("garbage collector");
  });

  it("adds up busy time by component, leaving out idle time and the profiler's own", () => {
    const nodes = [
      { id: 1, callFrame: frame("(root)", ""), children: [2, 3, 5, 7] },
      { id: 2, callFrame: frame("(idle)", "") },
      {
        id: 3,
        callFrame: frame("take", `${root}node_modules/iovalkey/built/Redis.js`),
        children: [4],
      },
      { id: 4, callFrame: frame("writev", "") },
      { id: 5, callFrame: frame("post", "node:inspector"), children: [6] },
      { id: 6, callFrame: frame("stringify", "") },
      { id: 7, callFrame: frame("(program)", "") },
    ];
    const totals = splitProfile(
      { nodes, samples: [2, 4, 4, 6, 7, 2], timeDeltas: [1000, 10, 20, 500, 3, 1000] },
      root,
    );
    expect(Object.fromEntries(totals)).toEqual({ "limits (Valkey client)": 30, other: 3 });
  });
});
