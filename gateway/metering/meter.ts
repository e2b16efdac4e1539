import type { Registry } from "prom-client";
import type { DurableOutbox } from "../outbox/durable-outbox.js";
import { registerMeterCollectors, type MeterCollectors } from "./meter-metrics.js";
import { UsageRecordSchema, type UsageInput, type UsageRecord } from "./usage-record.js";

/** The part of the outbox the meter needs; a DurableOutbox<UsageRecord> fits. */
export type UsageOutbox = Pick<DurableOutbox<UsageRecord>, "append">;

export interface MeterOptions {
  registry: Registry;
  outbox: UsageOutbox;
  now?: () => Date;
}

/**
 * Subscription metering for the API-key route (the payment route is billed by
 * the payment provider and never comes here). Each completed request becomes
 * one usage record: counted on /metrics at once, and journaled durably for the
 * billing sink before `record` resolves. The handler awaits `record` before it
 * answers, so a request the client saw succeed is never missing from billing.
 */
export class Meter {
  private readonly collectors: MeterCollectors;
  private readonly outbox: UsageOutbox;
  private readonly now: () => Date;

  constructor(options: MeterOptions) {
    this.collectors = registerMeterCollectors(options.registry);
    this.outbox = options.outbox;
    this.now = options.now ?? (() => new Date());
  }

  async record(input: UsageInput): Promise<void> {
    // Validated here, so a bad token count (negative, fractional) fails the
    // request that produced it instead of poisoning the journal.
    const usage = UsageRecordSchema.parse(toUsageRecord(input, this.now()));
    // Counters first: they are in-memory and observational; the journal
    // append is the durable part and may fail (disk full), which the caller
    // must see.
    const labels = {
      account: usage.account,
      project: usage.project ?? "",
      model: usage.model,
    };
    this.collectors.requests.inc(labels);
    this.collectors.tokens.inc({ ...labels, direction: "input" }, usage.input_tokens);
    this.collectors.tokens.inc({ ...labels, direction: "output" }, usage.output_tokens);
    await this.outbox.append(usage.request_id, usage);
  }
}

/** Builds the record; pure. Field order is the wire order. */
export function toUsageRecord(input: UsageInput, now: Date): UsageRecord {
  return {
    request_id: input.request_id,
    account: input.account,
    project: input.project ?? null,
    model: input.model,
    input_tokens: input.input_tokens,
    output_tokens: input.output_tokens,
    time: input.time ?? now.toISOString(),
  };
}
