import { Redis } from "iovalkey";
import type { Logger } from "../../lib/logger.js";
import type { SharedStateMetrics } from "./shared-state-metrics.js";

/**
 * The gateway's one connection to Valkey (or Redis), and whether it is up
 * now. The request path never waits for Valkey to come back: commands are
 * not queued while the connection is down (they fail at once and the caller
 * falls back to this replica's memory), and a command that takes longer
 * than `commandTimeoutMs` fails the same way. The connection retries in the
 * background; the transitions, not the requests, are logged.
 */
export interface ValkeyConnectionOptions {
  url: string;
  /** From a mounted Secret; overrides a password in the URL. */
  password?: string;
  logger: Logger;
  metrics: SharedStateMetrics;
  /** A stuck server costs a request at most this long before the fallback answers. */
  commandTimeoutMs?: number;
}

export const DEFAULT_COMMAND_TIMEOUT_MS = 250;
/** Reconnection attempts back off to this, so a returning server is found within a second. */
const MAX_RECONNECT_DELAY_MS = 1_000;

export class ValkeyConnection {
  readonly client: Redis;
  private up = false;
  private wasEverUp = false;
  private loggedDown = false;
  private readonly logger: Logger;
  private readonly metrics: SharedStateMetrics;
  private readonly where: string;

  constructor(options: ValkeyConnectionOptions) {
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.where = redactedUrl(options.url);
    this.client = new Redis(options.url, {
      ...(options.password ? { password: options.password } : {}),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      connectTimeout: 2_000,
      retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
    });
    this.metrics.valkeyUp.set(0);
    this.client.on("ready", () => this.markUp());
    this.client.on("close", () => this.markDown("connection closed"));
    // Without a listener an error event would throw; the state change is what matters.
    this.client.on("error", (error: Error) => this.markDown(error.message));
  }

  /** Connects once; start-up goes on without Valkey when it is not there (the fallback serves). */
  async connect(): Promise<void> {
    try {
      await this.client.connect();
    } catch {
      // Logged by markDown; the retry strategy keeps trying in the background.
    }
  }

  /** True while commands can be sent. */
  get available(): boolean {
    return this.up && this.client.status === "ready";
  }

  async close(): Promise<void> {
    this.client.removeAllListeners("close");
    this.client.on("error", () => {});
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }

  private markUp(): void {
    if (this.up) return;
    this.up = true;
    this.metrics.valkeyUp.set(1);
    if (this.wasEverUp) {
      this.logger.info(
        { valkey: this.where },
        "valkey is back: limits and signatures are shared again",
      );
    } else {
      this.logger.info(
        { valkey: this.where },
        "valkey connected: limits and signatures are shared",
      );
    }
    this.wasEverUp = true;
  }

  /** Logged once per outage, not once per failed request or reconnection attempt. */
  private markDown(reason: string): void {
    const wasUp = this.up;
    this.up = false;
    this.metrics.valkeyUp.set(0);
    if (wasUp || !this.loggedDown) {
      this.loggedDown = true;
      this.logger.warn(
        { valkey: this.where, reason },
        "valkey unreachable: rate limits fall back to this replica's share, replays are refused from this replica's memory",
      );
    }
  }
}

/** The URL without its password, for logs. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparseable url)";
  }
}
