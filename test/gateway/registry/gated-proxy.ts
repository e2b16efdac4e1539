import { connect, createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

/**
 * A loopback TCP relay to the API server that holds every connection until
 * opened: a gateway behind it cannot sync, deterministically, for as long as
 * a test needs. TLS passes through untouched (the server's certificate names
 * 127.0.0.1, which is still the address the client dials).
 */
export interface GatedProxy {
  url: string;
  open(): void;
  close(): Promise<void>;
}

export async function startGatedProxy(target: URL): Promise<GatedProxy> {
  const held: Socket[] = [];
  const sockets = new Set<Socket>();
  let isOpen = false;

  const relay = (client: Socket) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.pipe(upstream).pipe(client);
  };

  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    if (isOpen) relay(client);
    else held.push(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `https://127.0.0.1:${port}`,
    open() {
      isOpen = true;
      for (const client of held.splice(0)) if (!client.destroyed) relay(client);
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
