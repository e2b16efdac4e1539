// Section 3 of `npm run bench:batch`: memory and time of the gateway
// process that ingests a batch file and validates it, and of one running a
// batch, each for a small and a ten times larger input in the same run. The
// gateway is a real `modelgate gateway` child process (file registry, a
// real PostgreSQL server as the store, tiny-nli in a runtime of this
// process); its resident memory is sampled from /proc every 10 ms, so the
// load generator's own memory is not in the figures. Growth is the peak
// during a step minus the resident size just before it: flat means the
// larger input does not raise it in proportion.
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { Batch } from "openai/resources/batches";
import { generateApiKey } from "../../../gateway/auth/key-format.js";
import { finished, nliLine, openaiClient, submit, waitFor } from "../../gateway/batch/support.js";
import { fixtureFolder, startRuntime } from "../../runtime/support/runtime-server.js";
import { freePort } from "../../support/free-port.js";
import { seedPgliteFolder } from "../../support/pglite-template.js";
import { startPostgresServer } from "../../support/postgres-server.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { fmt } from "../runtime/stats.js";

export interface IngestPlan {
  /** Batch input files uploaded and validated: size in MiB, requests in it. */
  uploads: Array<{ mb: number; lines: number }>;
  /** Batches of small requests run to completion. */
  batches: number[];
  workers: number;
  /** The gateway's store: a PostgreSQL server, or the embedded PGlite in its state folder. */
  store?: "postgres" | "pglite";
  /** NODE_OPTIONS of the gateway child (V8 flags that bound its heap), as the chart sets them. */
  nodeOptions?: string;
}

export const INGEST_PLANS: Record<"quick" | "full", IngestPlan> = {
  quick: {
    uploads: [
      { mb: 4, lines: 1000 },
      { mb: 40, lines: 10_000 },
    ],
    batches: [200, 2000],
    workers: 4,
  },
  full: {
    uploads: [
      { mb: 20, lines: 5000 },
      { mb: 200, lines: 50_000 },
    ],
    batches: [5000, 50_000],
    workers: 8,
  },
};

export interface IngestResult {
  rows: string[];
  broken: boolean;
}

/** Resident memory of a process, from /proc (Linux), in MiB. */
async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return kb ? Number(kb) / 1024 : Number.NaN;
}

/**
 * The V8 heap in use in the child (its metrics endpoint), in MiB: beside the
 * peak RSS, it tells memory the process keeps (a heap that grows from batch
 * to batch) from garbage not yet collected (RSS up, heap back down).
 */
async function heapUsedMb(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text().catch(() => "");
  const bytes = /^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1];
  return bytes ? Number(bytes) / 1024 / 1024 : Number.NaN;
}

/** Runs `step` while sampling the process's RSS: seconds taken and peak growth over the start. */
async function measured<T>(
  pid: number,
  step: () => Promise<T>,
): Promise<{ value: T; seconds: number; growthMb: number }> {
  const baseMb = await rssMb(pid);
  let peak = baseMb;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, await rssMb(pid).catch(() => peak));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  const started = performance.now();
  try {
    const value = await step();
    const seconds = (performance.now() - started) / 1000;
    sampling = false;
    await sampler;
    return { value, seconds, growthMb: peak - baseMb };
  } finally {
    sampling = false;
  }
}

/** A batch input line of `bytes` bytes with its newline (tiny-nli; the input padded with words). */
function paddedLine(n: number, bytes: number): string {
  const { custom_id, body } = nliLine(n);
  const lineOf = (input: string) =>
    JSON.stringify({ custom_id, method: "POST", url: "/v1/responses", body: { ...body, input } });
  const input = String(body.input);
  const room = Math.max(0, bytes - 1 - lineOf(input).length);
  return `${lineOf(`${input}${" and more".repeat(Math.ceil(room / 9)).slice(0, room)}`)}\n`;
}

/** Streams a multipart upload of `lines` batch lines, `mb` MiB in all, without holding it. */
async function uploadBatchFile(
  url: string,
  key: string,
  mb: number,
  lines: number,
): Promise<{ id?: string; bytes?: number; status: number }> {
  const boundary = "modelgatebenchboundary";
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  const perLine = Math.floor((mb * 1024 * 1024) / lines);
  function* body() {
    yield Buffer.from(head);
    let block: string[] = [];
    for (let n = 0; n < lines; n++) {
      block.push(paddedLine(n, perLine));
      if (block.length === 64) {
        yield Buffer.from(block.join(""));
        block = [];
      }
    }
    if (block.length > 0) yield Buffer.from(block.join(""));
    yield Buffer.from(tail);
  }
  const init: RequestInit & { duplex: "half" } = {
    method: "POST",
    headers: { "x-api-key": key, "content-type": `multipart/form-data; boundary=${boundary}` },
    body: Readable.toWeb(Readable.from(body())) as ReadableStream,
    duplex: "half",
  };
  const response = await fetch(`${url}/v1/files`, init);
  const file = (await response.json()) as { id?: string; bytes?: number };
  return { ...file, status: response.status };
}

export async function runIngestBench(
  plan: IngestPlan,
  log: (line: string) => void,
): Promise<IngestResult> {
  const rows: string[] = [];
  let broken = false;
  const dir = await mkdtemp(join(tmpdir(), "bench-ingest-"));
  const pg = plan.store === "pglite" ? undefined : await startPostgresServer();
  const databaseUrl = await pg?.createDatabase();
  const runtime = await startRuntime({
    path: await fixtureFolder("tiny-nli"),
    modelId: "tiny-nli",
  });
  const key = generateApiKey();
  await writeFile(
    join(dir, "keys.yaml"),
    `accounts:\n  - id: acme\nkeys:\n  - id: ${key.id}\n    hash: ${key.hash}\n    account: acme\n`,
  );
  await mkdir(join(dir, "models"));
  await writeFile(
    join(dir, "models", "models.yaml"),
    `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: tiny-nli\nspec:\n  task: zero-shot-classification\n  source: { uri: file:///models/x }\n  pricing: { serviceSlug: tiny-nli, inputPerMillionTokens: '4' }\nstatus:\n  endpoint: ${runtime.url}\n`,
  );
  // The embedded store starts from the migrated template, as the tests' gateways do.
  if (!pg) await seedPgliteFolder(join(dir, "state", "db"));
  const port = await freePort();
  const metricsPort = await freePort();
  let gateway: ServiceProcess | undefined;
  try {
    gateway = await startServiceProcess({
      args: [
        "gateway",
        "--registry=file",
        `--models-dir=${join(dir, "models")}`,
        `--keys-file=${join(dir, "keys.yaml")}`,
        `--state-dir=${join(dir, "state")}`,
        "--host=127.0.0.1",
        `--port=${port}`,
        `--metrics-port=${metricsPort}`,
        `--batch-workers=${plan.workers}`,
        "--batch-poll-ms=50",
      ],
      env: {
        ...(databaseUrl ? { MODELGATE_DATABASE_URL: databaseUrl } : {}),
        ...(plan.nodeOptions !== undefined ? { NODE_OPTIONS: plan.nodeOptions } : {}),
      },
      readyUrl: `http://127.0.0.1:${metricsPort}/readyz`,
    });
    const pid = gateway.child.pid!;
    const url = `http://127.0.0.1:${port}`;
    const heap = () => heapUsedMb(`http://127.0.0.1:${metricsPort}/metrics`);
    const client = openaiClient(url, key.key);
    log(
      `ingest: gateway child pid ${pid} on ${plan.store ?? "postgres"}, NODE_OPTIONS '${plan.nodeOptions ?? process.env.NODE_OPTIONS ?? ""}', ${fmt(await rssMb(pid))} MiB resident at start`,
    );

    for (const { mb, lines } of plan.uploads) {
      const upload = await measured(pid, () => uploadBatchFile(url, key.key, mb, lines));
      const file = upload.value;
      if (file.status !== 200 || !file.id) {
        log(`upload of ${mb} MiB failed: ${file.status} ${JSON.stringify(file).slice(0, 200)}`);
        broken = true;
        continue;
      }
      const validation = await measured(pid, async () => {
        const batch = await client.batches.create({
          input_file_id: file.id!,
          endpoint: "/v1/responses",
          completion_window: "24h",
        });
        return waitFor(client, batch.id, (b) => b.status !== "validating", 1_800_000);
      });
      const validated = validation.value;
      // Only ingestion is measured here: the padded requests are not run.
      await client.batches.cancel(validated.id).catch(() => undefined);
      await waitFor(client, validated.id, finished, 600_000);
      const ok = validated.status === "in_progress" && validated.request_counts?.total === lines;
      if (!ok) {
        log(`validation of ${mb} MiB: ${validated.status} ${JSON.stringify(validated.errors)}`);
        broken = true;
      }
      log(
        `ingest ${mb} MiB (${lines} lines): upload ${fmt(upload.seconds)} s, RSS +${fmt(upload.growthMb)} MiB; validation ${fmt(validation.seconds)} s, RSS +${fmt(validation.growthMb)} MiB`,
      );
      rows.push(
        `| upload ${mb} MiB, ${lines} lines | ${fmt(upload.seconds)} s (${fmt(mb / upload.seconds)} MiB/s), RSS +${fmt(upload.growthMb)} MiB | flat |`,
        `| validate ${mb} MiB, ${lines} lines | ${fmt(validation.seconds)} s (${fmt(lines / validation.seconds)} lines/s), RSS +${fmt(validation.growthMb)} MiB | flat |`,
      );
    }

    for (const count of plan.batches) {
      const heapBefore = await heap();
      const run = await measured(pid, async () => {
        const created = await submit(
          client,
          Array.from({ length: count }, (_, n) => nliLine(n)),
        );
        return waitFor(client, created.id, finished, 3_600_000);
      });
      const done: Batch = run.value;
      if (done.status !== "completed" || done.request_counts?.completed !== count) {
        log(`batch of ${count}: ${done.status} ${JSON.stringify(done.request_counts)}`);
        broken = true;
      }
      const heapAfter = await heap();
      log(
        `batch of ${count} lines in the child: ${fmt(run.seconds)} s (${fmt(count / run.seconds)} req/s), RSS +${fmt(run.growthMb)} MiB, heap used ${fmt(heapBefore)} -> ${fmt(heapAfter)} MiB`,
      );
      rows.push(
        `| worker, batch of ${count} lines | ${fmt(run.seconds)} s (${fmt(count / run.seconds)} req/s), RSS +${fmt(run.growthMb)} MiB (heap used ${fmt(heapBefore)} -> ${fmt(heapAfter)} MiB) | flat |`,
      );
    }
  } finally {
    await gateway?.stop();
    await runtime.close();
    await pg?.stop();
  }
  return { rows, broken };
}
