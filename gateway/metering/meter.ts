import type { Registry } from "prom-client";
import type { DurableOutbox } from "../outbox/durable-outbox.js";
import { registerMeterCollectors, type MeterCollectors } from "./meter-metrics.js";
import { usageRecordSchema, type UsageRecord } from "./usage-record.js";

/** The part of the outbox the meter needs; a DurableOutbox<UsageRecord> fits. */
export type UsageOutbox = Pick<DurableOutbox<UsageRecord>, "append">;

export interface MeterOptions {
  registry: Registry;
  outbox: UsageOutbox;
}

/**
 * Subscription metering for the API-key route (the payment route is billed by
 * the payment provider and never comes here). Each served request becomes one
 * usage record, keyed by its response id: counted on /metrics at once, and
 * journaled durably for the billing sink before `record` resolves. The route
 * answers only after, so a request the client saw succeed is never missing
 * from billing.
 */
export class Meter {
  private readonly collectors: MeterCollectors;
  private readonly outbox: UsageOutbox;

  constructor(options: MeterOptions) {
    this.collectors = registerMeterCollectors(options.registry);
    this.outbox = options.outbox;
  }

  async record(record: UsageRecord): Promise<void> {
    // Validated here, so a bad token count (negative, fractional) fails the
    // request that produced it instead of poisoning the journal.
    const usage = usageRecordSchema.parse(record);
    // Counters first: they are in-memory and observational; the journal
    // append is the durable part and may fail (disk full), which the caller
    // must see.
    const labels = { account: usage.account, project: usage.project ?? "", model: usage.model };
    this.collectors.requests.inc(labels);
    this.collectors.tokens.inc({ ...labels, direction: "input" }, usage.inputTokens);
    this.collectors.tokens.inc({ ...labels, direction: "output" }, usage.outputTokens);
    await this.outbox.append(usage.responseId, usage);
  }
}
