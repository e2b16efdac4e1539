import { writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { until } from "../conformance/support.js";
import type { Platform } from "./platform.js";

export interface StandInRuntime {
  /** Requests it has read to their end. */
  hits(): number;
  close(): Promise<void>;
}

/**
 * A stand-in runtime on loopback serving text-generation `model` on both
 * routes, with `write` answering each request once its body is read (and
 * handed that body): a runtime that fails in ways the real one does not. Its InferenceModel is a
 * new file in the platform's registry folder (the state folder's parent).
 */
export async function standInRuntime(
  p: Platform,
  model: string,
  write: (res: ServerResponse, req: IncomingMessage, body: Buffer) => void,
): Promise<StandInRuntime> {
  let hits = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      hits++;
      write(res, req, Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await writeFile(
    join(dirname(p.stateDir), `${model}.yaml`),
    `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: ${model}\nspec:\n  task: text-generation\n  source: { uri: file:///models/x }\nstatus:\n  endpoint: ${endpoint}\n`,
  );
  const registry = p.components.deps.registry;
  await until(`the ${model} model`, () => registry.resolve(model) !== undefined);
  return {
    hits: () => hits,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
