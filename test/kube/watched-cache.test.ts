import { CoreV1Api, type V1ConfigMap } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWatchedCache, type WatchedCache } from "../../lib/kube/watched-cache.js";
import { createTestNamespace, eventually, testCluster } from "../support/cluster.js";

describe("startWatchedCache against the test cluster", () => {
  let core: CoreV1Api;
  let namespace: string;
  let remove: () => Promise<void>;
  let cache: WatchedCache<V1ConfigMap>;
  const seen: string[] = [];

  beforeAll(async () => {
    const { kc } = await testCluster();
    core = kc.makeApiClient(CoreV1Api);
    ({ namespace, remove } = await createTestNamespace(kc, "watched-cache"));
    await core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: "before" }, data: { a: "1" } },
    });
    cache = startWatchedCache<V1ConfigMap>({
      kc,
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      list: () => core.listNamespacedConfigMap({ namespace }),
      onChange: (cm, verb) => seen.push(`${verb}:${cm.metadata?.name}`),
    });
    await cache.synced;
  });

  afterAll(async () => {
    await cache?.stop();
    await remove?.();
  });

  it("holds what existed before it started once synced", () => {
    expect(cache.get("before", namespace)?.data).toEqual({ a: "1" });
    expect(seen).toContain("add:before");
  });

  it("follows creates, updates and deletes", async () => {
    await core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: "later" }, data: { b: "2" } },
    });
    await eventually(() => expect(cache.get("later", namespace)?.data).toEqual({ b: "2" }));
    await core.patchNamespacedConfigMap({
      namespace,
      name: "later",
      body: [{ op: "replace", path: "/data/b", value: "3" }],
    });
    await eventually(() => expect(cache.get("later", namespace)?.data).toEqual({ b: "3" }));
    await core.deleteNamespacedConfigMap({ namespace, name: "later" });
    await eventually(() => expect(cache.get("later", namespace)).toBeUndefined());
    expect(seen).toEqual(expect.arrayContaining(["add:later", "update:later", "delete:later"]));
  });
});
