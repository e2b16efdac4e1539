import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fetchModel } from "../../../runtime/fetch/fetch-model.js";
import type { FetchError } from "../../../runtime/fetch/fetch-model.js";
import { MARKER_FILE } from "../../../runtime/fetch/safe-path.js";
import { FAST_RETRY, digests, exists, modelTree, readTree, tempDir } from "./helpers.js";
import { startHubStandIn } from "./hub-stand-in.js";

const MAIN_SHA = "a".repeat(40);
const V1_SHA = "b".repeat(40);
const v1 = { ...modelTree(), "config.json": Buffer.from('{"model_type":"gpt2","v":1}') };

const hubRepos = () => ({
  "acme/tiny-gpt": {
    refs: { main: MAIN_SHA, v1: V1_SHA },
    commits: { [MAIN_SHA]: modelTree(), [V1_SHA]: v1 },
  },
  "acme/private": { refs: { main: MAIN_SHA }, commits: { [MAIN_SHA]: modelTree() }, private: true },
});

describe("fetchModel with hf://", () => {
  it("lists the repo at main, pins the commit sha and resolves every file at it", async () => {
    const hub = await startHubStandIn(hubRepos());
    const dest = join(await tempDir(), "tiny");
    const result = await fetchModel({
      source: "hf://acme/tiny-gpt",
      dest,
      env: { HF_ENDPOINT: hub.endpoint },
    });

    const { [MARKER_FILE]: marker, ...copied } = await readTree(dest);
    expect(digests(copied)).toEqual(digests(modelTree()));
    expect(result.revision).toBe(MAIN_SHA);
    expect(JSON.parse(marker?.toString() ?? "{}")).toMatchObject({
      source: "hf://acme/tiny-gpt",
      revision: MAIN_SHA,
    });
    expect(hub.requests[0]?.path).toBe("/api/models/acme/tiny-gpt/revision/main?blobs=true");
    const resolves = hub.requests.filter((r) => r.path.includes("/resolve/"));
    expect(resolves.map((r) => r.path).sort()).toEqual([
      `/acme/tiny-gpt/resolve/${MAIN_SHA}/config.json`,
      `/acme/tiny-gpt/resolve/${MAIN_SHA}/onnx/model.onnx`,
      `/acme/tiny-gpt/resolve/${MAIN_SHA}/tokenizer.json`,
    ]);
    // The large file came through the redirect to the CDN path.
    expect(hub.requests.some((r) => r.path.startsWith("/cdn/"))).toBe(true);
  });

  it("fetches the revision named in the URI, or the revision option over it", async () => {
    const hub = await startHubStandIn(hubRepos());
    const env = { HF_ENDPOINT: hub.endpoint };
    const atV1 = join(await tempDir(), "v1");
    await fetchModel({ source: "hf://acme/tiny-gpt@v1", dest: atV1, env });
    expect((await readTree(atV1))["config.json"]?.toString()).toContain('"v":1');

    const overridden = join(await tempDir(), "main");
    const result = await fetchModel({
      source: "hf://acme/tiny-gpt@v1",
      revision: "main",
      dest: overridden,
      env,
    });
    expect(result.revision).toBe(MAIN_SHA);
    expect((await readTree(overridden))["config.json"]?.toString()).not.toContain('"v":1');
  });

  it("uses the endpoint option over HF_ENDPOINT", async () => {
    const hub = await startHubStandIn(hubRepos());
    const dest = join(await tempDir(), "tiny");
    await fetchModel({
      source: "hf://acme/tiny-gpt",
      dest,
      endpoint: hub.endpoint,
      env: { HF_ENDPOINT: "http://127.0.0.1:9" },
    });
    expect(await exists(join(dest, "config.json"))).toBe(true);
  });

  it("sends HF_TOKEN as a bearer token and never prints it", async () => {
    const hub = await startHubStandIn(hubRepos(), { token: "hf_secret" });
    const dest = join(await tempDir(), "tiny");
    const lines: string[] = [];
    const log = (obj: Record<string, unknown>, msg: string) =>
      lines.push(msg + JSON.stringify(obj));
    await fetchModel({
      source: "hf://acme/private",
      dest,
      env: { HF_ENDPOINT: hub.endpoint, HF_TOKEN: "hf_secret" },
      logger: { info: log, warn: log },
    });
    expect(hub.requests[0]?.authorization).toBe("Bearer hf_secret");
    // Cross-origin CDN redirects drop it; same-origin ones (here) may keep it.
    expect(lines.join("\n")).not.toContain("hf_secret");
  });

  it("fails with access_denied and a hint without a token", async () => {
    const hub = await startHubStandIn(hubRepos(), { token: "hf_secret" });
    const dest = join(await tempDir(), "tiny");
    const error = (await fetchModel({
      source: "hf://acme/private",
      dest,
      env: { HF_ENDPOINT: hub.endpoint },
    }).catch((e: unknown) => e)) as FetchError;
    expect(error.code).toBe("access_denied");
    expect(error.message).toContain("HF_TOKEN");
    expect(await exists(dest)).toBe(false);
  });

  it("fails with source_not_found for an unknown repo or revision", async () => {
    const hub = await startHubStandIn(hubRepos());
    const env = { HF_ENDPOINT: hub.endpoint };
    for (const source of ["hf://acme/nope", "hf://acme/tiny-gpt@v9"]) {
      const dest = join(await tempDir(), "tiny");
      await expect(fetchModel({ source, dest, env, retry: FAST_RETRY })).rejects.toMatchObject({
        code: "source_not_found",
      });
      expect(await exists(dest)).toBe(false);
    }
  });

  it("rejects a sibling name that climbs out of the destination", async () => {
    const evil = { "../../escape.txt": Buffer.from("x"), "config.json": Buffer.from("{}") };
    const hub = await startHubStandIn({
      "acme/evil": { refs: { main: MAIN_SHA }, commits: { [MAIN_SHA]: evil } },
    });
    const root = await tempDir();
    await expect(
      fetchModel({
        source: "hf://acme/evil",
        dest: join(root, "m"),
        env: { HF_ENDPOINT: hub.endpoint },
      }),
    ).rejects.toMatchObject({ code: "unsafe_path" });
    expect(Object.keys(await readTree(root))).toEqual([]);
  });

  it("verifies large files against the hub's LFS sha256", async () => {
    const tree = modelTree();
    const corrupt = Buffer.from(tree["onnx/model.onnx"] as Buffer).fill(7, 0, 10);
    const hub = await startHubStandIn({
      "acme/tiny-gpt": {
        refs: { main: MAIN_SHA },
        commits: { [MAIN_SHA]: tree },
        served: { "onnx/model.onnx": corrupt },
      },
    });
    const dest = join(await tempDir(), "tiny");
    const error = (await fetchModel({
      source: "hf://acme/tiny-gpt",
      dest,
      env: { HF_ENDPOINT: hub.endpoint },
    }).catch((e: unknown) => e)) as FetchError;
    expect(error.code).toBe("checksum_mismatch");
    expect(error.message).toContain("onnx/model.onnx");
    expect(await exists(dest)).toBe(false);
  });
});
