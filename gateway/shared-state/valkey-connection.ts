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
  password?: string | undefined;
  /** PEM CA certificates to trust for `rediss://` (default: the system's). */
  ca?: string | undefined;
  logger: Logger;
  metrics: SharedStateMetrics;
  /** A stuck server costs a request at most this long before the fallback answers. */
  commandTimeoutMs?: number;
}

export const DEFAULT_COMMAND_TIMEOUT_MS = 250;
/** Reconnection attempts back off to this, so a returning server is found within a second. */
const MAX_RECONNECT_DELAY_MS = 1_000;
/**
 * After a command fails on a connection that looks open (a stuck or
 * overloaded server), requests skip Valkey this long before one tries
 * again: a stuck server costs one request a second the command timeout,
 * not every request.
 */
export const SUSPEND_AFTER_FAILURE_MS = 1_000;

export class ValkeyConnection {
  readonly client: Redis;
  private connected = false;
  private suspendedUntil = 0;
  /** What was last reported (gauge, log); null before the first report. */
  private sharing: boolean | null = null;
  private wasEverShared = false;
  private readonly logger: Logger;
  private readonly metrics: SharedStateMetrics;
  private readonly where: string;

  constructor(options: ValkeyConnectionOptions) {
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.where = redactedUrl(options.url);
    // The client lets the URL's password win over an option: take it out of the URL.
    const url = options.password ? withoutPassword(options.url) : options.url;
    this.client = new Redis(url, {
      ...(options.password ? { password: options.password } : {}),
      ...(options.ca ? { tls: { ca: options.ca } } : {}),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      connectTimeout: 2_000,
      retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
    });
    this.metrics.valkeyUp.set(0);
    this.client.on("ready", () => {
      this.connected = true;
      this.suspendedUntil = 0;
      this.report(true);
    });
    this.client.on("close", () => {
      this.connected = false;
      this.report(false, "connection closed");
    });
    // Without a listener an error event would throw; the state change is what matters.
    this.client.on("error", (error: Error) => {
      this.connected = false;
      this.report(false, error.message);
    });
  }

  /** Connects once; start-up goes on without Valkey when it is not there (the fallback serves). */
  async connect(): Promise<void> {
    try {
      await this.client.connect();
    } catch {
      // Reported by the error event; the retry strategy keeps trying in the background.
    }
  }

  /** True while commands should be sent: connected, and not suspended after a failure. */
  get available(): boolean {
    return this.connected && this.client.status === "ready" && Date.now() >= this.suspendedUntil;
  }

  /** A command failed (timeout, or the connection dropped under it): decide alone for a while. */
  commandFailed(error: unknown): void {
    this.suspendedUntil = Date.now() + SUSPEND_AFTER_FAILURE_MS;
    this.report(false, error instanceof Error ? error.message : String(error));
  }

  /** A command answered: shared again if a failure had suspended it. */
  commandSucceeded(): void {
    if (this.sharing !== true && this.connected) this.report(true);
  }

  async close(): Promise<void> {
    this.client.removeAllListeners("close");
    this.client.removeAllListeners("error");
    this.client.on("error", () => {});
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }

  /** The gauge and one log line per change: not one per failed request or reconnection attempt. */
  private report(sharing: boolean, reason?: string): void {
    if (this.sharing === sharing) return;
    this.sharing = sharing;
    this.metrics.valkeyUp.set(sharing ? 1 : 0);
    if (!sharing) {
      this.logger.warn(
        { valkey: this.where, reason },
        "valkey unreachable: rate limits fall back to this replica's share, replays are refused from this replica's memory",
      );
      return;
    }
    this.logger.info(
      { valkey: this.where },
      this.wasEverShared
        ? "valkey is back: limits and signatures are shared again"
        : "valkey connected: limits and signatures are shared",
    );
    this.wasEverShared = true;
  }
}

function withoutPassword(url: string): string {
  const parsed = new URL(url);
  parsed.password = "";
  return parsed.toString();
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
