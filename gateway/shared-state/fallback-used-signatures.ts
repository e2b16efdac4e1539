import type { Logger } from "../../lib/logger.js";
import type { InProcessUsedSignatures, UsedSignatures } from "../pay/used-signatures.js";
import type { SharedStateMetrics } from "./shared-state-metrics.js";
import type { ValkeyConnection } from "./valkey-connection.js";

/**
 * Used signatures shared through Valkey, remembered locally as well: while
 * Valkey is away, a signature is refused if this replica has seen it (the
 * ones it accepted before the outage included); one used on another replica
 * during the outage can be accepted here once, which docs/state.md states.
 * Never failed open on a replay this replica knows.
 */
export interface FallbackUsedSignaturesOptions {
  shared: UsedSignatures;
  local: InProcessUsedSignatures;
  connection: ValkeyConnection;
  metrics: SharedStateMetrics;
  logger: Logger;
}

export class FallbackUsedSignatures implements UsedSignatures {
  constructor(private readonly options: FallbackUsedSignaturesOptions) {}

  async claim(id: string, expiresAtMs: number): Promise<boolean> {
    const { connection, shared, local } = this.options;
    if (connection.available) {
      try {
        const claimed = await shared.claim(id, expiresAtMs);
        connection.commandSucceeded();
        if (!claimed) return false;
        // Kept here too, for an outage to come; and a signature this replica
        // accepted during an outage (so Valkey never saw it) is still a replay.
        return await local.claim(id, expiresAtMs);
      } catch (error) {
        connection.commandFailed(error);
        this.options.logger.debug({ err: error }, "valkey claim failed; deciding locally");
      }
    }
    this.options.metrics.fallbacks.inc({ kind: "signature" });
    return local.claim(id, expiresAtMs);
  }

  /**
   * Forgotten here and in Valkey. While Valkey is away the shared claim
   * stays until it expires: the retry is then refused as a replay, the
   * strict side, as a claim decided locally is.
   */
  async release(id: string): Promise<void> {
    const { connection, shared, local } = this.options;
    await local.release(id);
    if (!connection.available) return;
    try {
      await shared.release(id);
      connection.commandSucceeded();
    } catch (error) {
      connection.commandFailed(error);
      this.options.logger.debug({ err: error }, "valkey release failed");
    }
  }
}
