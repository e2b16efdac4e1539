import { Redis } from "iovalkey";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";

describe("the throwaway redis-server of the tests", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it("serves, stops (connections refused) and starts again empty on the same port", async () => {
    const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await client.connect();
    await client.set("k", "v");
    expect(await client.get("k")).toBe("v");
    client.disconnect();

    await server.stop();
    const offline = new Redis(server.url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    offline.on("error", () => {});
    await expect(offline.connect()).rejects.toThrow();
    offline.disconnect();

    await server.start();
    const again = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await again.connect();
    // No persistence: a restart forgets everything.
    expect(await again.get("k")).toBeNull();
    again.disconnect();
  });
});
