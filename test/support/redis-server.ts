import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port.js";

/**
 * A throwaway Redis server (Debian's `redis-server`, protocol-compatible with
 * Valkey) for the tests that need the shared counters: a loopback port of
 * its own, no persistence, a temp folder as its working directory. It can be
 * stopped and started again on the same port mid-test, which is how the
 * outage tests take Valkey away from a running gateway and give it back.
 */
export interface RedisServer {
  /** `redis://127.0.0.1:<port>`: stays the same across restarts. */
  url: string;
  port: number;
  /** The running server's process id (for CPU readings); null while stopped. */
  readonly pid: number | null;
  /** Server output, for post-mortems. */
  logs: string[];
  /** SIGKILL: connections drop at once, as when a node dies. */
  stop(): Promise<void>;
  /** Starts it again on the same port (empty: nothing was saved). */
  start(): Promise<void>;
  /** SIGSTOP: connections stay open and nothing answers, as a stuck server. */
  pause(): void;
  /** SIGCONT after `pause`. */
  resume(): void;
  /** Stops it and removes its folder. */
  close(): Promise<void>;
}

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? "/usr/bin/redis-server";

/** Whether the server binary is installed (`apt-get install -y redis-server`). */
export function redisServerInstalled(): boolean {
  return existsSync(REDIS_SERVER_BIN);
}

/** Whether a TCP connection to the port succeeds. */
async function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("error", () => resolve(false));
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
  });
}

/** Resolves once a TCP connection to the port succeeds and the server answers PING. */
async function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    // With requirepass the answer is NOAUTH: alive all the same.
    socket.once("data", (chunk) => done(/^(\+PONG|-NOAUTH)/.test(chunk.toString())));
    socket.setTimeout(1_000, () => done(false));
  });
}

export interface RedisServerOptions {
  /** Clients must send this password (`requirepass`). */
  password?: string;
  /** Serve TLS only, with this certificate and key (PEM files); clients are not asked for one. */
  tls?: { certFile: string; keyFile: string };
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  if (!redisServerInstalled()) {
    throw new Error(`${REDIS_SERVER_BIN} is missing: apt-get install -y redis-server`);
  }
  const dir = await mkdtemp(join(tmpdir(), "redis-"));
  const port = await freePort();
  const logs: string[] = [];
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    if (child) return;
    const started = spawn(
      REDIS_SERVER_BIN,
      [
        ...(options.tls
          ? [
              "--port",
              "0",
              "--tls-port",
              String(port),
              "--tls-cert-file",
              options.tls.certFile,
              "--tls-key-file",
              options.tls.keyFile,
              "--tls-auth-clients",
              "no",
            ]
          : ["--port", String(port)]),
        ...(options.password ? ["--requirepass", options.password] : []),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        dir,
      ],
      { cwd: dir, stdio: ["ignore", "pipe", "pipe"] },
    );
    child = started;
    const keep = (chunk: Buffer) =>
      logs.push(...chunk.toString("utf8").split("\n").filter(Boolean));
    started.stdout.on("data", keep);
    started.stderr.on("data", keep);
    exited = new Promise((resolve) => started.once("exit", () => resolve()));
    const deadline = Date.now() + 10_000;
    // Over TLS a plain PING cannot be read: the port accepting connections is enough.
    while (!(await (options.tls ? accepts(port) : answersPing(port)))) {
      if (started.exitCode !== null || Date.now() > deadline) {
        started.kill("SIGKILL");
        child = null;
        throw new Error(`redis-server did not start on ${port}:\n${logs.slice(-20).join("\n")}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  const stop = async () => {
    const running = child;
    if (!running) return;
    child = null;
    if (running.exitCode === null) running.kill("SIGKILL");
    await exited;
  };

  await start();
  return {
    url: `${options.tls ? "rediss" : "redis"}://127.0.0.1:${port}`,
    port,
    get pid() {
      return child?.pid ?? null;
    },
    logs,
    stop,
    start,
    pause() {
      child?.kill("SIGSTOP");
    },
    resume() {
      child?.kill("SIGCONT");
    },
    async close() {
      child?.kill("SIGCONT");
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
