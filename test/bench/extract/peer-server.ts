// The peer of the entity-extraction benchmark: transformers.js'
// token-classification pipeline in one process, behind a plain node:http
// server on loopback, so that it is measured the way our runtime is (the
// same load generator, HTTP and JSON on both sides, a process of its own
// whose memory can be read). Each request is one pipeline call, as in a
// service built on the pipeline: it has no batching across requests. The
// answer is the entities with character offsets, made by the same
// aggregation the parity test applies (token-classification-reference.ts),
// so the peer does the work our runtime does. Speaks runtime-child.ts'
// protocol: one JSON argument, one `{"url": ...}` line when ready, SIGTERM
// or a closed stdin to stop.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { sessionOptions } from "../../../runtime/engine/session.js";
import { ReferenceTokenClassifier } from "../../runtime/real-models/token-classification-reference.js";

export interface PeerConfig {
  /** The folder holding the model folder (transformers.js' `localModelPath`). */
  modelsDir: string;
  modelId: string;
  threads: number;
  threshold: number;
}

const config = JSON.parse(process.argv[2] ?? "{}") as PeerConfig;
// The runtime's own session options, so the peer is not handicapped by them.
const reference = await ReferenceTokenClassifier.load(config.modelsDir, config.modelId, {
  sessionOptions: sessionOptions(config.threads),
});
// The first run pays for allocations; the runtime warms up too before it answers.
await reference.entities("John Smith lives in Paris and his email is john@example.com");

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
  try {
    const body = JSON.parse(await readBody(request)) as { input?: unknown };
    if (request.method !== "POST" || typeof body.input !== "string") {
      response.writeHead(400).end();
      return;
    }
    const entities = (await reference.entities(body.input)).filter(
      (e) => e.score >= config.threshold,
    );
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ entities }));
  } catch (error) {
    response.writeHead(500, { "content-type": "text/plain" }).end(String(error));
  }
}

const server = createServer((request, response) => void answer(request, response));
server.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const address = server.address();
if (address === null || typeof address === "string") throw new Error("no TCP address");

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await reference.dispose();
  process.exit(0);
}
process.once("SIGTERM", () => void stop());
process.stdin.on("end", () => void stop());
process.stdin.on("close", () => void stop());
process.stdin.resume();
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${address.port}` })}\n`);
