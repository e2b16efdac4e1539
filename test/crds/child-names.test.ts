import { describe, expect, it } from "vitest";
import { childNames, fitName, MAX_NAME_LENGTH } from "../../crds/child-names.js";
import { LONGEST_NAME } from "../operator/model-fixture.js";

const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

describe("childNames", () => {
  const cases = [
    { name: "smollm", service: "smollm", deployment: "smollm-runtime" },
    { name: "7b-chat", service: "im-7b-chat", deployment: "7b-chat-runtime" },
    { name: "a".repeat(55), service: "a".repeat(55), deployment: undefined },
    { name: LONGEST_NAME, service: LONGEST_NAME, deployment: undefined },
    { name: `9${"y".repeat(62)}`, service: undefined, deployment: undefined },
  ];
  it.each(cases)("$name", ({ name, service, deployment }) => {
    const names = childNames(name);
    if (service !== undefined) expect(names.service).toBe(service);
    if (deployment !== undefined) expect(names.deployment).toBe(deployment);
    for (const child of [names.service, names.deployment, names.hpa, names.pdb]) {
      expect(child.length).toBeLessThanOrEqual(MAX_NAME_LENGTH);
      expect(child).toMatch(DNS_1123_LABEL);
    }
    expect(names.service).toMatch(DNS_1035_LABEL);
    expect(names.hpa).toBe(names.deployment);
    expect(names.pdb).toBe(names.deployment);
    // Deterministic: the same model finds the same children on every pass.
    expect(childNames(name)).toEqual(names);
  });

  it("keeps the suffix and a readable prefix when the name is too long", () => {
    const deployment = childNames(LONGEST_NAME).deployment;
    expect(deployment).toMatch(/^mx+-[0-9a-f]{8}-runtime$/);
    expect(deployment).toHaveLength(MAX_NAME_LENGTH);
  });

  it("gives two long names that share a prefix different children", () => {
    const a = `${"q".repeat(60)}-ab`;
    const b = `${"q".repeat(60)}-cd`;
    expect(childNames(a).deployment).not.toBe(childNames(b).deployment);
  });

  it("never leaves a dash before the hash", () => {
    // The cut lands right after a dash in the base name.
    const base = `${"a".repeat(45)}-${"b".repeat(17)}`;
    expect(fitName(base, "-runtime")).not.toMatch(/--/);
  });
});
