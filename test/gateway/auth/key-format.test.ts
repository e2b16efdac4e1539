import { describe, expect, it } from "vitest";
import {
  KEY_LENGTH,
  KEY_PREFIX,
  checkKeyFormat,
  checksumOf,
  generateApiKey,
  hashApiKey,
} from "../../../gateway/auth/key-format.js";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

describe("API key format", () => {
  it("generates mg_live_ keys of the documented shape, with an id and a sha256 hash", () => {
    const { key, id, hash } = generateApiKey();
    expect(key).toMatch(/^mg_live_[0-9A-Za-z]{38}$/);
    expect(key).toHaveLength(KEY_LENGTH);
    expect(id).toMatch(/^key_[0-9A-Za-z]{16}$/);
    expect(hash).toBe(`sha256:${hashApiKey(key)}`);
    expect(hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(checkKeyFormat(key)).toBe("ok");
  });

  it("takes a chosen id", () => {
    expect(generateApiKey({ id: "ci-robot" }).id).toBe("ci-robot");
  });

  it("never generates the same key twice", () => {
    const keys = new Set(Array.from({ length: 2000 }, () => generateApiKey().key));
    expect(keys.size).toBe(2000);
  });

  it("rejects any single changed character by checksum, without a lookup", () => {
    const { key } = generateApiKey();
    let variants = 0;
    for (let i = KEY_PREFIX.length; i < key.length; i += 1) {
      for (const c of BASE62) {
        if (c === key[i]) continue;
        const typo = key.slice(0, i) + c + key.slice(i + 1);
        variants += 1;
        expect(checkKeyFormat(typo), typo).toBe("malformed");
      }
    }
    expect(variants).toBe(38 * 61);
  });

  it("rejects swapped neighbours, truncation, wrong prefix, other alphabets", () => {
    const { key } = generateApiKey();
    const i = KEY_PREFIX.length + 3;
    if (key[i] !== key[i + 1]) {
      const swapped = key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2);
      expect(checkKeyFormat(swapped)).toBe("malformed");
    }
    expect(checkKeyFormat(key.slice(0, -1))).toBe("malformed");
    expect(checkKeyFormat(`${key}x`)).toBe("malformed");
    expect(checkKeyFormat(key.replace("mg_live_", "mg_test_"))).toBe("malformed");
    expect(checkKeyFormat(key.replace(/.$/, "-"))).toBe("malformed");
    expect(checkKeyFormat("")).toBe("malformed");
    expect(checkKeyFormat(" ".repeat(KEY_LENGTH))).toBe("malformed");
  });

  it("writes the CRC32 as exactly 6 base62 characters", () => {
    expect(checksumOf("a".repeat(32))).toMatch(/^[0-9A-Za-z]{6}$/);
    // CRC32("123456789") = 0xCBF43926 = 3421780262, the standard check value.
    let n = 3421780262;
    let expected = "";
    for (let i = 0; i < 6; i += 1) {
      expected = BASE62[n % 62]! + expected;
      n = Math.floor(n / 62);
    }
    expect(checksumOf("123456789")).toBe(expected);
  });
});
