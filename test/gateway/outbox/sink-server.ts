import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A loopback receiver that dedupes on Idempotency-Key, as a billing sink
 * should: the first delivery of a key is counted, later ones answer 409.
 * It can be told to fail (a status for the next N requests), to see retries.
 */
export interface CountingSink {
  url: string;
  port: number;
  /** Distinct keys counted, with the body first received for each. */
  counted: Map<string, unknown>;
  /** Every request received, in order, by key (duplicates and failures included). */
  attempts: string[];
  headers: IncomingMessage["headers"][];
  /** Answer `status` to the next `count` requests (Infinity: until told otherwise). */
  failNext(count: number, status?: number): void;
  /** Answer `status` to requests for this key, for good. */
  rejectKey(key: string, status: number): void;
  close(): Promise<void>;
}

export async function startCountingSink(port = 0): Promise<CountingSink> {
  const counted = new Map<string, unknown>();
  const attempts: string[] = [];
  const headers: IncomingMessage["headers"][] = [];
  const rejected = new Map<string, number>();
  let failures = 0;
  let failStatus = 503;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const key = String(req.headers["idempotency-key"] ?? "");
      attempts.push(key);
      headers.push(req.headers);
      if (failures > 0) {
        failures -= 1;
        res.writeHead(failStatus).end("try later");
        return;
      }
      const rejection = rejected.get(key);
      if (rejection !== undefined) {
        res.writeHead(rejection).end("bad record");
        return;
      }
      if (counted.has(key)) {
        res.writeHead(409).end("duplicate");
        return;
      }
      counted.set(key, JSON.parse(Buffer.concat(chunks).toString("utf8")));
      res.writeHead(201).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${actual}/usage`,
    port: actual,
    counted,
    attempts,
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
