import { describe, expect, it } from "vitest";
import { containsDesired } from "../../../operator/controller/contains.js";
import { buildDeployment } from "../../../operator/children/deployment.js";
import { makeModel } from "../model-fixture.js";

describe("containsDesired", () => {
  const desired = buildDeployment(makeModel(), { image: "img", imagePullPolicy: "IfNotPresent" });

  it("holds for the server's copy with defaults, status and other managers' fields added", () => {
    const actual = structuredClone(desired);
    actual.metadata!.uid = "u";
    actual.metadata!.labels!.extra = "someone-else";
    actual.spec!.template.spec!.dnsPolicy = "ClusterFirst";
    actual.spec!.template.spec!.containers[0]!.terminationMessagePath = "/dev/termination-log";
    actual.status = { replicas: 1 };
    expect(containsDesired(actual, desired)).toBe(true);
  });

  it("fails when a field the operator sets was changed or removed", () => {
    const changed = structuredClone(desired);
    changed.spec!.template.spec!.containers[0]!.args = ["runtime", "serve"];
    expect(containsDesired(changed, desired)).toBe(false);
    const removed = structuredClone(desired);
    delete removed.metadata!.labels!["app.kubernetes.io/part-of"];
    expect(containsDesired(removed, desired)).toBe(false);
  });

  it("compares lists element by element and by length", () => {
    expect(containsDesired([{ a: 1, b: 2 }], [{ a: 1 }])).toBe(true);
    expect(containsDesired([{ a: 1 }, { a: 2 }], [{ a: 1 }])).toBe(false);
    expect(containsDesired([{ a: 2 }], [{ a: 1 }])).toBe(false);
  });

  it("treats int-or-string values alike by their text", () => {
    expect(containsDesired({ port: "8080" }, { port: 8080 })).toBe(true);
    expect(containsDesired({ maxSurge: "25%" }, { maxSurge: "25%" })).toBe(true);
    expect(containsDesired({ cpu: "1" }, { cpu: "1000m" })).toBe(false);
  });
});
