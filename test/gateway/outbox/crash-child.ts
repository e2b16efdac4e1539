// A process that journals records through a DurableOutbox and dies by
// SIGKILL the moment its last append resolved: no close, no exit handlers, no
// sync it did not already do. Used by journal-sync.test.ts to show what a
// crash of the gateway process leaves on disk.
// Arguments: <dir> <count> <journal sync: always | everyMs>.
import { pino } from "pino";
import { DurableOutbox } from "../../../gateway/outbox/durable-outbox.js";

const [dir, countArg, syncArg] = process.argv.slice(2);
const outbox = new DurableOutbox<{ n: number }>({
  dir: dir!,
  name: "usage",
  send: () => Promise.reject(new Error("never delivered: the process dies first")),
  retry: { baseDelayMs: 1_000, maxDelayMs: 1_000 },
  logger: pino({ level: "silent" }),
  journalSync: syncArg === "always" ? "always" : { everyMs: Number(syncArg) },
});
await outbox.open();
for (let n = 0; n < Number(countArg); n++) await outbox.append(`req_${n}`, { n });
process.kill(process.pid, "SIGKILL");
