import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A loopback receiver of the usage sink protocol (docs/metering.md): each
 * POST carries `{"items":[{key, record}…]}`, and the sink dedupes on the
 * keys, as a billing sink should: the first delivery of a key is counted,
 * later ones are accepted and not counted again. A batch is taken whole or
 * refused whole. It can be told to fail (a status for the next N requests),
 * to see retries, or to refuse any batch holding a given key.
 */
export interface CountingSink {
  url: string;
  port: number;
  /** Distinct keys counted, with the body first received for each. */
  counted: Map<string, unknown>;
  /** Every key received, in order (duplicates and failures included). */
  attempts: string[];
  /** The keys of each request, in order. */
  batches: string[][];
  headers: IncomingMessage["headers"][];
  /** Answer `status` to the next `count` requests (Infinity: until told otherwise). */
  failNext(count: number, status?: number): void;
  /** Answer `status` to every batch holding this key, for good. */
  rejectKey(key: string, status: number): void;
  close(): Promise<void>;
}

export async function startCountingSink(port = 0): Promise<CountingSink> {
  const counted = new Map<string, unknown>();
  const attempts: string[] = [];
  const batches: string[][] = [];
  const headers: IncomingMessage["headers"][] = [];
  const rejected = new Map<string, number>();
  let failures = 0;
  let failStatus = 503;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      let items: { key: string; record: unknown }[];
      try {
        items = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { items: typeof items })
          .items;
        if (!Array.isArray(items) || items.some((i) => typeof i.key !== "string"))
          throw new Error();
      } catch {
        res.writeHead(400).end("body is not a batch of items");
        return;
      }
      const keys = items.map((i) => i.key);
      attempts.push(...keys);
      batches.push(keys);
      headers.push(req.headers);
      if (failures > 0) {
        failures -= 1;
        res.writeHead(failStatus).end("try later");
        return;
      }
      const rejection = keys.map((k) => rejected.get(k)).find((s) => s !== undefined);
      if (rejection !== undefined) {
        res.writeHead(rejection).end("bad record");
        return;
      }
      for (const item of items) if (!counted.has(item.key)) counted.set(item.key, item.record);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${actual}/usage`,
    port: actual,
    counted,
    attempts,
    batches,
    headers,
    failNext(count, status = 503) {
      failures = count;
      failStatus = status;
    },
    rejectKey(key, status) {
      rejected.set(key, status);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
