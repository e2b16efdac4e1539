import type { ModelRef } from "../children/owner.js";
import type { Logger } from "../../lib/logger.js";
import type { ModelEvent, Writer } from "./cluster-writer.js";

/**
 * Events are recorded off the reconcile path, as client-go's broadcaster
 * does: a reconcile never waits on (or fails because of) an event write. A
 * few writes run at once; past `maxPending` new events are dropped and
 * counted, because during a storm an unbounded backlog of events would only
 * add load to an API server that is already busy.
 */
export interface EventSink {
  record(model: ModelRef, event: ModelEvent): void;
  /** Waits for the events already recorded (graceful shutdown). */
  flush(): Promise<void>;
}

export function eventSink(
  writer: Pick<Writer, "event">,
  logger: Logger,
  options: { concurrency?: number; maxPending?: number } = {},
): EventSink {
  const concurrency = options.concurrency ?? 8;
  const maxPending = options.maxPending ?? 1000;
  const pending: [ModelRef, ModelEvent][] = [];
  let running = 0;
  let dropped = 0;
  const idle: (() => void)[] = [];

  const pump = (): void => {
    while (running < concurrency && pending.length > 0) {
      const [model, event] = pending.shift()!;
      running++;
      writer
        .event(model, event)
        .catch((err: unknown) =>
          logger.warn(
            { model: model.metadata.name, reason: event.reason, err: String(err) },
            "cannot record event",
          ),
        )
        .finally(() => {
          running--;
          pump();
        });
    }
    if (running === 0 && pending.length === 0) idle.splice(0).forEach((resolve) => resolve());
  };

  return {
    record(model, event) {
      if (pending.length >= maxPending) {
        if (dropped++ % 100 === 0) logger.warn({ dropped }, "too many pending events; dropping");
        return;
      }
      pending.push([model, event]);
      pump();
    },
    flush() {
      if (running === 0 && pending.length === 0) return Promise.resolve();
      return new Promise((resolve) => idle.push(resolve));
    },
  };
}
