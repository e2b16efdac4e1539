import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSharedState, type SharedState } from "../../../gateway/shared-state/shared-state.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";

/**
 * Valkey over TLS with a password, as a production install runs it: a
 * redis-server serving TLS only with a certificate for 127.0.0.1 made here,
 * trusted through the CA option; the password given apart from the URL
 * (from its file, in the gateway) wins over one in the URL.
 */
const run = promisify(execFile);
const PASSWORD = "valkey-password-for-tests";
let dir: string;
let server: RedisServer;
let ca: string;
const opened: SharedState[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "valkey-tls-"));
  await run("openssl", [
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=127.0.0.1",
    "-addext",
    "subjectAltName=IP:127.0.0.1",
    "-keyout",
    join(dir, "key.pem"),
    "-out",
    join(dir, "cert.pem"),
  ]);
  ca = await readFile(join(dir, "cert.pem"), "utf8");
  server = await startRedisServer({
    password: PASSWORD,
    tls: { certFile: join(dir, "cert.pem"), keyFile: join(dir, "key.pem") },
  });
});
afterAll(async () => {
  for (const state of opened) await state.close();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

async function open(url: string, password: string | undefined, withCa: boolean) {
  const state = await createSharedState({
    valkeyUrl: url,
    valkeyPassword: password,
    valkeyCa: withCa ? ca : undefined,
    replicas: 1,
    defaults: { requestsPerMinute: 1, burst: 5 },
    registry: new Registry(),
    logger: pino({ level: "silent" }),
  });
  opened.push(state);
  return state;
}

async function connectedWithin(state: SharedState, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (state.connection?.available) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

describe("Valkey over TLS with a password", () => {
  it("connects with the CA and the password, the file's password winning over the URL's", async () => {
    expect(server.url).toMatch(/^rediss:\/\//);
    const url = server.url.replace("rediss://", "rediss://:wrong-password@");
    const state = await open(url, PASSWORD, true);
    expect(await connectedWithin(state, 5_000)).toBe(true);
    const limits = { requestsPerMinute: 1, burst: 5 };
    const decision = await state.limiter.take([{ id: "tls:requests", limits, cost: 1 }]);
    expect(decision).toMatchObject({ ok: true, states: [{ remaining: 4 }] });
    expect(await state.usedSignatures.claim("tls-sig", Date.now() + 10_000)).toBe(true);
  });

  it("stays on the fallback without the CA, or with a wrong password", async () => {
    const untrusted = await open(server.url, PASSWORD, false);
    const refused = await open(server.url, "not-the-password", true);
    expect(await connectedWithin(untrusted, 1_500)).toBe(false);
    expect(await connectedWithin(refused, 500)).toBe(false);
    // Still deciding, alone.
    const limits = { requestsPerMinute: 1, burst: 5 };
    expect((await untrusted.limiter.take([{ id: "x", limits, cost: 1 }])).ok).toBe(true);
  });
});
