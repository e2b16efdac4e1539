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
 * again, alone: a stuck server costs one request a second the command
 * timeout, not every request, however many are in flight.
 */
export const SUSPEND_AFTER_FAILURE_MS = 1_000;

export class ValkeyConnection {
  readonly client: Redis;
  private connected = false;
  /** A command failed and none has answered since: one request at a time probes. */
  private suspended = false;
  private suspendedUntil = 0;
  /** Pings once a suspension runs out, so that sharing resumes (and the gauge says so) without traffic. */
  private prober: NodeJS.Timeout | undefined;
  private closed = false;
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
      this.suspended = false;
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

  /**
   * True while commands should be sent: connected, and not suspended after
   * a failure. Once a suspension has run out, the caller that asks first is
   * the probe: the others go on deciding alone until its command answers
   * (shared again) or fails (suspended again), or for another suspension if
   * it never says.
   */
  get available(): boolean {
    if (!this.connected || this.client.status !== "ready") return false;
    if (!this.suspended) return true;
    const now = Date.now();
    if (now < this.suspendedUntil) return false;
    this.suspendedUntil = now + SUSPEND_AFTER_FAILURE_MS;
    return true;
  }

  /** A command failed (timeout, or the connection dropped under it): decide alone for a while. */
  commandFailed(error: unknown): void {
    this.suspended = true;
    this.suspendedUntil = Date.now() + SUSPEND_AFTER_FAILURE_MS;
    this.report(false, error instanceof Error ? error.message : String(error));
    this.probeLater();
  }

  /**
   * Pings once the suspension runs out; a later failure has pushed it on,
   * so the timer waits for what is left. A lost connection is not pinged:
   * reconnecting ends the suspension ("ready").
   */
  private probeLater(delayMs: number = SUSPEND_AFTER_FAILURE_MS): void {
    if (this.prober !== undefined || this.closed) return;
    this.prober = setTimeout(() => {
      this.prober = undefined;
      if (!this.suspended || this.closed) return;
      const left = this.suspendedUntil - Date.now();
      if (left > 0) return this.probeLater(left);
      if (!this.available) return;
      this.client.ping().then(
        () => this.commandSucceeded(),
        (error: unknown) => this.commandFailed(error),
      );
    }, delayMs);
    this.prober.unref();
  }

  /** A command answered: shared again if a failure had suspended it. */
  commandSucceeded(): void {
    this.suspended = false;
    if (this.sharing !== true && this.connected) this.report(true);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.prober);
    this.prober = undefined;
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
