import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fetchModel } from "../../../runtime/fetch/fetch-model.js";
import type { FetchError } from "../../../runtime/fetch/fetch-model.js";
import { MARKER_FILE } from "../../../runtime/fetch/safe-path.js";
import {
  FAST_RETRY,
  digests,
  exists,
  fileDigest,
  modelTree,
  readTree,
  sha256,
  sha256sums,
  tempDir,
} from "./helpers.js";
import { cutAfter } from "./model-server.js";
import { s3Error, startS3StandIn } from "./s3-stand-in.js";

const credentials = { accessKeyId: "AKIDTEST", secretAccessKey: "not-a-secret" };
const tree = modelTree();
const model = tree["onnx/model.onnx"] as Buffer;

/** The model under `models/tiny/`, with neighbours that must not be fetched. */
const bucket = () => ({
  ...Object.fromEntries(Object.entries(tree).map(([k, v]) => [`models/tiny/${k}`, v])),
  "models/tiny-other/config.json": Buffer.from("{}"),
  "models/tiny/": Buffer.alloc(0),
  "readme.txt": Buffer.from("hello"),
});

describe("fetchModel with s3://", () => {
  it("lists across pages and copies every object under the prefix", async () => {
    const s3 = await startS3StandIn({ buckets: { weights: bucket() }, pageSize: 2 });
    const dest = join(await tempDir(), "tiny");
    await fetchModel({
      source: "s3://weights/models/tiny",
      dest,
      env: { AWS_ENDPOINT_URL_S3: s3.endpoint },
      s3: { credentials },
    });

    const { [MARKER_FILE]: _marker, ...copied } = await readTree(dest);
    expect(digests(copied)).toEqual(digests(tree));
    const lists = s3.requests.filter((r) => r.query["list-type"] === "2");
    expect(lists.length).toBeGreaterThan(1);
    expect(lists[0]?.query.prefix).toBe("models/tiny/");
    expect(lists.slice(1).every((r) => r.query["continuation-token"])).toBe(true);
    // The SDK signed the requests with the credentials given.
    expect(s3.requests[0]?.authorization).toContain("Credential=AKIDTEST/");
    expect(s3.requests[0]?.authorization).toContain("/us-east-1/s3/");
  });

  it("takes the endpoint from AWS_ENDPOINT_URL and the region from AWS_REGION", async () => {
    const s3 = await startS3StandIn({ buckets: { weights: bucket() } });
    const dest = join(await tempDir(), "tiny");
    await fetchModel({
      source: "s3://weights/models/tiny/",
      dest,
      env: { AWS_ENDPOINT_URL: s3.endpoint, AWS_REGION: "eu-west-3" },
      s3: { credentials },
    });
    expect(s3.requests[0]?.authorization).toContain("/eu-west-3/s3/");
    expect(await exists(join(dest, "onnx", "model.onnx"))).toBe(true);
  });

  it("resumes an object with a ranged GetObject after a cut", async () => {
    const s3 = await startS3StandIn({
      buckets: { weights: bucket() },
      override: (_req, res, path, count) => {
        if (!path.endsWith("onnx/model.onnx") || count > 1) return false;
        cutAfter(res, model, 100_000);
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    await fetchModel({
      source: "s3://weights/models/tiny",
      dest,
      endpoint: s3.endpoint,
      env: {},
      s3: { credentials },
      retry: FAST_RETRY,
    });
    const gets = s3.requests.filter((r) => r.path.endsWith("onnx/model.onnx"));
    expect(gets.map((r) => r.range)).toEqual([undefined, "bytes=100000-"]);
    expect(await fileDigest(join(dest, "onnx/model.onnx"))).toBe(sha256(model));
  });

  it("retries a 503 SlowDown and fails at once on 403", async () => {
    const flaky = await startS3StandIn({
      buckets: { weights: bucket() },
      override: (_req, res, path, count) => {
        if (!path.endsWith("config.json") || count > 1) return false;
        s3Error(res, 503, "SlowDown", "Please reduce your request rate.");
        return true;
      },
    });
    const ok = join(await tempDir(), "tiny");
    const base = {
      source: "s3://weights/models/tiny",
      env: {},
      s3: { credentials },
      retry: FAST_RETRY,
    };
    await fetchModel({ ...base, dest: ok, endpoint: flaky.endpoint });
    expect(await exists(join(ok, "config.json"))).toBe(true);

    const denied = await startS3StandIn({
      buckets: { weights: bucket() },
      override: (_req, res, path) => {
        if (!path.endsWith("config.json")) return false;
        s3Error(res, 403, "AccessDenied", "Access Denied");
        return true;
      },
    });
    const dest = join(await tempDir(), "tiny");
    const error = (await fetchModel({ ...base, dest, endpoint: denied.endpoint }).catch(
      (e: unknown) => e,
    )) as FetchError;
    expect(error.code).toBe("access_denied");
    expect(error.message).toContain("s3://weights/models/tiny/config.json");
    expect(denied.requests.filter((r) => r.path.endsWith("config.json"))).toHaveLength(1);
    expect(await exists(dest)).toBe(false);
  });

  it("fails with source_not_found for an empty prefix or a missing bucket", async () => {
    const s3 = await startS3StandIn({ buckets: { weights: bucket() } });
    for (const source of ["s3://weights/models/nothing", "s3://missing-bucket/models/tiny"]) {
      const dest = join(await tempDir(), "tiny");
      await expect(
        fetchModel({ source, dest, endpoint: s3.endpoint, env: {}, s3: { credentials } }),
      ).rejects.toMatchObject({ code: "source_not_found" });
      expect(await exists(dest)).toBe(false);
    }
  });

  it("fetches a single object named by the URI", async () => {
    const s3 = await startS3StandIn({ buckets: { weights: bucket() } });
    const dest = join(await tempDir(), "one");
    await fetchModel({
      source: "s3://weights/models/tiny/config.json",
      dest,
      endpoint: s3.endpoint,
      env: {},
      s3: { credentials },
    });
    expect(Object.keys(await readTree(dest)).sort()).toEqual([MARKER_FILE, "config.json"]);
  });

  it("uses a SHA256SUMS object in the prefix to verify the others", async () => {
    const sums = sha256sums({ ...tree, "tokenizer.json": Buffer.from("other") });
    const s3 = await startS3StandIn({
      buckets: { weights: { ...bucket(), "models/tiny/SHA256SUMS": Buffer.from(sums) } },
    });
    const dest = join(await tempDir(), "tiny");
    await expect(
      fetchModel({
        source: "s3://weights/models/tiny",
        dest,
        endpoint: s3.endpoint,
        env: {},
        s3: { credentials },
      }),
    ).rejects.toMatchObject({ code: "checksum_mismatch" });
    expect(await exists(dest)).toBe(false);
  });
});
