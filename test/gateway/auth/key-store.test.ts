import { describe, expect, it } from "vitest";
import { authorizeProject } from "../../../gateway/auth/key-store.js";
import { KeyStore } from "../../../gateway/auth/key-store.js";
import { parseKeysFile } from "../../../gateway/auth/keys-file.js";
import { keysFileText, makeKey } from "./support.js";

const active = makeKey("acme");
const narrow = makeKey("acme", { projects: ["batch"] });
const revoked = makeKey("globex", { revoked: true });
const store = new KeyStore(parseKeysFile(keysFileText([active, narrow, revoked])));

describe("KeyStore.authenticate", () => {
  it("accepts a listed key and returns its id, account and projects", () => {
    expect(store.authenticate(active.key)).toEqual({
      ok: true,
      key: { id: active.id, account: "acme", projects: ["web", "batch"], admin: false },
    });
  });

  it("says missing for no header or an empty one", () => {
    expect(store.authenticate(undefined)).toEqual({ ok: false, reason: "missing" });
    expect(store.authenticate("")).toEqual({ ok: false, reason: "missing" });
  });

  it("says malformed for a bad checksum, a foreign string, or a repeated header", () => {
    const typo =
      active.key.slice(0, 12) + (active.key[12] === "a" ? "b" : "a") + active.key.slice(13);
    expect(store.authenticate(typo)).toEqual({ ok: false, reason: "malformed" });
    expect(store.authenticate("Bearer something")).toEqual({ ok: false, reason: "malformed" });
    expect(store.authenticate([active.key, active.key])).toEqual({
      ok: false,
      reason: "malformed",
    });
  });

  it("says unknown for a well-formed key that is not in the file", () => {
    expect(store.authenticate(makeKey("acme").key)).toEqual({ ok: false, reason: "unknown" });
  });

  it("says revoked for a revoked key", () => {
    expect(store.authenticate(revoked.key)).toEqual({
      ok: false,
      reason: "revoked",
      keyId: revoked.id,
    });
  });
});

describe("project authorization", () => {
  const keyOf = (k: typeof active) => {
    const result = store.authenticate(k.key);
    if (!result.ok) throw new Error("fixture key must authenticate");
    return result.key;
  };

  it("allows no x-project-id at all", () => {
    expect(authorizeProject(keyOf(active), undefined)).toEqual({ ok: true });
  });

  it("allows the account's projects to a key without its own list", () => {
    expect(store.authorizeProject(keyOf(active), "web")).toEqual({ ok: true, project: "web" });
    expect(store.authorizeProject(keyOf(active), "batch")).toEqual({ ok: true, project: "batch" });
  });

  it("forbids another account's project, an unknown one, and one outside the key's list", () => {
    expect(store.authorizeProject(keyOf(active), "lab")).toEqual({
      ok: false,
      reason: "forbidden",
    });
    expect(store.authorizeProject(keyOf(active), "nope")).toEqual({
      ok: false,
      reason: "forbidden",
    });
    expect(store.authorizeProject(keyOf(narrow), "web")).toEqual({
      ok: false,
      reason: "forbidden",
    });
    expect(store.authorizeProject(keyOf(narrow), "batch")).toEqual({ ok: true, project: "batch" });
    expect(store.authorizeProject(keyOf(active), ["web", "batch"])).toEqual({
      ok: false,
      reason: "forbidden",
    });
  });
});
