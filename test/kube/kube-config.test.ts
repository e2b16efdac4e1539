import { createConnection, createServer, type Server } from "node:net";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadKubeConfig, PooledKubeConfig } from "../../lib/kube/kube-config.js";
import { testCluster } from "../support/cluster.js";

/**
 * client-node 2 makes a new undici dispatcher, so a new TCP and TLS
 * connection, for every API call. A TCP relay in front of the test
 * cluster's API server counts the connections each kind of KubeConfig opens.
 */
describe("PooledKubeConfig: one keep-alive pool for every API call", () => {
  let relay: Server;
  let accepted = 0;
  const sockets = new Set<{ destroy(): void }>();
  let kubeconfigText: string;

  beforeAll(async () => {
    const { kc } = await testCluster();
    const target = new URL(kc.getCurrentCluster()!.server);
    relay = createServer((client) => {
      accepted += 1;
      const upstream = createConnection(Number(target.port), target.hostname);
      sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("error", end).on("close", end);
      upstream.on("error", end).on("close", end);
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    const port = (relay.address() as { port: number }).port;
    // The same credentials, with the server address pointed at the relay
    // (the API server's certificate names 127.0.0.1, whatever the port).
    const copy = new KubeConfig();
    copy.loadFromString(kc.exportConfig());
    const cluster = copy.getCurrentCluster()!;
    (cluster as { server: string }).server = `https://127.0.0.1:${port}`;
    kubeconfigText = copy.exportConfig();
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => relay?.close(() => resolve()));
  });

  async function connectionsFor(kc: KubeConfig): Promise<number> {
    accepted = 0;
    const api = kc.makeApiClient(CoreV1Api);
    for (let i = 0; i < 10; i++) await api.listNamespace();
    await Promise.all(Array.from({ length: 5 }, () => api.listNamespace()));
    return accepted;
  }

  it("reuses connections where the library's own KubeConfig opens one per call", async () => {
    const plain = new KubeConfig();
    plain.loadFromString(kubeconfigText);
    const pooled = new PooledKubeConfig();
    pooled.loadFromString(kubeconfigText);

    // The library's default is what the pool is for: 15 calls, 15 connections.
    expect(await connectionsFor(plain)).toBe(15);
    // Sequential calls share one connection; concurrent ones at most one each.
    expect(await connectionsFor(pooled)).toBeLessThanOrEqual(5);
  });

  it("is what loadKubeConfig returns", async () => {
    const { kubeconfigPath } = await testCluster();
    expect(loadKubeConfig(kubeconfigPath)).toBeInstanceOf(PooledKubeConfig);
  });
});
