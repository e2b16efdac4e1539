import { describe, expect, it } from "vitest";
import {
  formatPaySignature,
  parsePaySignature,
  signatureIdentity,
  signPayload,
  signPayloadV2,
  verifyPaySignature,
  type VerifyPaySignatureInput,
} from "../../../gateway/pay/signature.js";

const NOW = 1_800_000_000;
const body = Buffer.from('{"model":"tiny-gpt","input":"Hello","max_output_tokens":16}');
const secrets = new Map<string, readonly string[]>([
  ["k1", ["secret-one"]],
  ["k2", ["secret-two"]],
]);

function verify(header: string | undefined, overrides: Partial<VerifyPaySignatureInput> = {}) {
  return verifyPaySignature({ header, rawBody: body, secrets, nowSeconds: NOW, ...overrides });
}

function header(parts: { t?: number; kid?: string; v1?: string[]; secret?: string }) {
  return formatPaySignature({
    t: parts.t ?? NOW,
    kid: parts.kid ?? "k1",
    v1: parts.v1 ?? [signPayload(body, parts.secret ?? "secret-one")],
  });
}

describe("verifyPaySignature", () => {
  it("accepts a signature over the raw bytes made with the kid's secret", () => {
    expect(verify(header({}))).toEqual({
      ok: true,
      kid: "k1",
      timestamp: NOW,
      digest: signPayload(body, "secret-one"),
      scheme: "v1",
    });
  });

  it("signs the body alone: the digest does not depend on t", () => {
    const v1 = signPayload(body, "secret-one");
    expect(verify(formatPaySignature({ t: NOW - 10, kid: "k1", v1: [v1] })).ok).toBe(true);
    expect(verify(formatPaySignature({ t: NOW + 10, kid: "k1", v1: [v1] })).ok).toBe(true);
  });

  describe("rotation", () => {
    it("accepts any one of several v1 values", () => {
      const bad = signPayload(body, "retired-secret");
      const good = signPayload(body, "secret-one");
      expect(verify(header({ v1: [bad, good] })).ok).toBe(true);
      expect(verify(header({ v1: [good, bad] })).ok).toBe(true);
    });

    it("tries every secret configured for the kid", () => {
      const rotating = new Map([["k1", ["old-secret", "new-secret"]]]);
      for (const secret of ["old-secret", "new-secret"]) {
        expect(verify(header({ secret }), { secrets: rotating }).ok).toBe(true);
      }
      expect(verify(header({ secret: "other" }), { secrets: rotating })).toEqual({
        ok: false,
        reason: "mismatch",
      });
    });
  });

  describe("mismatch", () => {
    it("rejects a signature made with the wrong secret", () => {
      expect(verify(header({ secret: "wrong" }))).toEqual({ ok: false, reason: "mismatch" });
    });

    it("rejects the same JSON re-encoded with other spacing or key order", () => {
      const parsed = JSON.parse(body.toString()) as Record<string, unknown>;
      const reencodings = [
        JSON.stringify(parsed, null, 2),
        JSON.stringify({ input: parsed.input, model: parsed.model, max_output_tokens: 16 }),
        body.toString() + "\n",
      ];
      for (const text of reencodings) {
        expect(verify(header({}), { rawBody: Buffer.from(text) })).toEqual({
          ok: false,
          reason: "mismatch",
        });
      }
    });

    it("rejects a truncated body", () => {
      expect(verify(header({}), { rawBody: body.subarray(0, body.length - 1) }).ok).toBe(false);
    });

    it("rejects a valid digest presented under another kid", () => {
      // Made with k2's secret, claimed as k1: the kid selects the key, so no match.
      expect(verify(header({ kid: "k1", secret: "secret-two" }))).toEqual({
        ok: false,
        reason: "mismatch",
      });
    });

    it.each([
      ["uppercase hex", signPayload(body, "secret-one").toUpperCase()],
      ["odd-length hex", signPayload(body, "secret-one").slice(0, 63)],
      ["short hex", "abcd"],
      ["too long", signPayload(body, "secret-one") + "00"],
      ["non-hex letters", "z".repeat(64)],
    ])("treats a v1 that cannot be a digest (%s) as a mismatch, not an error", (_name, v1) => {
      expect(verify(header({ v1: [v1] }))).toEqual({ ok: false, reason: "mismatch" });
    });
  });

  it("reports an unknown kid", () => {
    expect(verify(header({ kid: "k9" }))).toEqual({ ok: false, reason: "unknown_kid" });
  });

  it("treats a kid whose secret list is empty as unknown", () => {
    const partial = new Map([
      ["k1", ["secret-one"]],
      ["k2", []],
    ]);
    expect(verify(header({ kid: "k2" }), { secrets: partial })).toEqual({
      ok: false,
      reason: "unknown_kid",
    });
  });

  it("reports a missing header", () => {
    expect(verify(undefined)).toEqual({ ok: false, reason: "missing" });
    expect(verify("")).toEqual({ ok: false, reason: "missing" });
  });

  it("is not configured without any secret, whatever the header", () => {
    for (const empty of [new Map(), new Map([["k1", [""]]])]) {
      expect(verify(header({}), { secrets: empty })).toEqual({
        ok: false,
        reason: "not_configured",
      });
      expect(verify(undefined, { secrets: empty })).toEqual({
        ok: false,
        reason: "not_configured",
      });
    }
  });

  describe("staleness", () => {
    it("accepts a timestamp exactly at the tolerance, in either direction", () => {
      expect(verify(header({ t: NOW - 300 })).ok).toBe(true);
      expect(verify(header({ t: NOW + 300 })).ok).toBe(true);
    });

    it("reports a timestamp 301 s old as stale when the digest is right", () => {
      expect(verify(header({ t: NOW - 301 }))).toEqual({
        ok: false,
        reason: "stale",
        timestamp: NOW - 301,
      });
      expect(verify(header({ t: NOW + 301 })).ok).toBe(false);
    });

    it("reports a bad digest as a mismatch, never as stale", () => {
      expect(verify(header({ t: NOW - 301, secret: "wrong" }))).toEqual({
        ok: false,
        reason: "mismatch",
      });
    });

    it("honours a configured tolerance", () => {
      expect(verify(header({ t: NOW - 31 }), { toleranceSeconds: 30 })).toMatchObject({
        reason: "stale",
      });
    });
  });
});

describe("parsePaySignature", () => {
  const v1 = signPayload(body, "secret-one");

  it("parses the header form, several v1 included", () => {
    expect(parsePaySignature(`t=${NOW},kid=k1,v1=${v1},v1=abc`)).toEqual({
      ok: true,
      signature: { timestamp: NOW, kid: "k1", v1: [v1, "abc"], v2: [] },
    });
  });

  it("accepts the parts in any order", () => {
    expect(parsePaySignature(`v1=${v1},kid=k1,t=${NOW}`).ok).toBe(true);
  });

  it("accepts a single-element header array and refuses a repeated header", () => {
    expect(parsePaySignature([`t=${NOW},kid=k1,v1=${v1}`]).ok).toBe(true);
    expect(parsePaySignature([`t=${NOW},kid=k1,v1=${v1}`, `t=${NOW},kid=k1,v1=${v1}`])).toEqual({
      ok: false,
      reason: "malformed",
    });
    // What Node makes of two `pay-signature` header lines.
    expect(parsePaySignature(`t=${NOW},kid=k1,v1=${v1}, t=${NOW},kid=k1,v1=${v1}`).ok).toBe(false);
  });

  it.each([
    ["missing t", `kid=k1,v1=${v1}`],
    ["missing kid", `t=${NOW},v1=${v1}`],
    ["missing v1", `t=${NOW},kid=k1`],
    ["duplicate t", `t=${NOW},t=${NOW},kid=k1,v1=${v1}`],
    ["duplicate kid", `t=${NOW},kid=k1,kid=k2,v1=${v1}`],
    ["non-numeric t", `t=soon,kid=k1,v1=${v1}`],
    ["fractional t", `t=${NOW}.5,kid=k1,v1=${v1}`],
    ["negative t", `t=-${NOW},kid=k1,v1=${v1}`],
    ["signed t", `t=+${NOW},kid=k1,v1=${v1}`],
    ["leading-zero t", `t=0${NOW},kid=k1,v1=${v1}`],
    ["exponent t", `t=1.8e9,kid=k1,v1=${v1}`],
    ["empty t", `t=,kid=k1,v1=${v1}`],
    ["empty kid", `t=${NOW},kid=,v1=${v1}`],
    ["empty v1", `t=${NOW},kid=k1,v1=`],
    ["empty part", `t=${NOW},,kid=k1,v1=${v1}`],
    ["trailing comma", `t=${NOW},kid=k1,v1=${v1},`],
    ["leading comma", `,t=${NOW},kid=k1,v1=${v1}`],
    ["part without =", `t=${NOW},kid=k1,v1=${v1},v2`],
    ["unknown key", `t=${NOW},kid=k1,v1=${v1},v0=${v1}`],
    ["uppercase key", `T=${NOW},kid=k1,v1=${v1}`],
    ["space after comma", `t=${NOW}, kid=k1, v1=${v1}`],
    ["space around =", `t = ${NOW},kid=k1,v1=${v1}`],
    ["leading space", ` t=${NOW},kid=k1,v1=${v1}`],
    ["trailing space", `t=${NOW},kid=k1,v1=${v1} `],
    ["tab", `t=${NOW},\tkid=k1,v1=${v1}`],
    ["quoted kid", `t=${NOW},kid="k1",v1=${v1}`],
    ["semicolon separators", `t=${NOW};kid=k1;v1=${v1}`],
    ["CRLF log injection", `t=${NOW},kid=k1\r\nlevel=error msg=forged,v1=${v1}`],
    ["LF in v1", `t=${NOW},kid=k1,v1=${v1}\n`],
    ["NUL", `t=${NOW},kid=k1\u0000,v1=${v1}`],
    ["non-ASCII kid", `t=${NOW},kid=k\u00e9,v1=${v1}`],
    ["too many v1", `t=${NOW},kid=k1,${Array(9).fill(`v1=${v1}`).join(",")}`],
    ["overlong header", `t=${NOW},kid=k1,v1=${v1},` + "v1=ab,".repeat(400) + "v1=ab"],
  ])("rejects %s as malformed", (_name, value) => {
    expect(parsePaySignature(value)).toEqual({ ok: false, reason: "malformed" });
    expect(verifyPaySignature({ header: value, rawBody: body, secrets, nowSeconds: NOW })).toEqual({
      ok: false,
      reason: "malformed",
    });
  });
});

describe("signPayload and formatPaySignature", () => {
  it("is HMAC-SHA256 in lowercase hex, the same for a Buffer and its UTF-8 string", () => {
    const digest = signPayload(body, "secret-one");
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(signPayload(body.toString("utf8"), "secret-one")).toBe(digest);
    // RFC 4231 test case 2.
    expect(signPayload("what do ya want for nothing?", "Jefe")).toBe(
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    );
  });

  it("formats t, kid, then each v1", () => {
    expect(formatPaySignature({ t: 5, kid: "a", v1: ["01", "02"] })).toBe("t=5,kid=a,v1=01,v1=02");
  });
});

describe("v2: the timestamp signed too", () => {
  const v2 = (t: number, secret = "secret-one") => signPayloadV2(body, t, secret);

  it("accepts a v2 over `<t>.<body>` and says which scheme verified", () => {
    expect(verify(formatPaySignature({ t: NOW, kid: "k1", v2: [v2(NOW)] }))).toEqual({
      ok: true,
      kid: "k1",
      timestamp: NOW,
      digest: v2(NOW),
      scheme: "v2",
    });
  });

  it("refuses a v2 header whose t was rewritten, though its body is genuine", () => {
    expect(verify(formatPaySignature({ t: NOW - 5, kid: "k1", v2: [v2(NOW)] }))).toEqual({
      ok: false,
      reason: "mismatch",
    });
  });

  it("judges a header with a v2 by its v2 alone: a genuine v1 beside a forged v2 fails", () => {
    const v1 = signPayload(body, "secret-one");
    const forged = v2(NOW, "not-the-secret");
    expect(verify(formatPaySignature({ t: NOW, kid: "k1", v1: [v1], v2: [forged] })).ok).toBe(
      false,
    );
  });
});

describe("signatureIdentity", () => {
  it("is the same for the same t, kid and bytes, and differs when any of them does", () => {
    const one = signatureIdentity(NOW, "k1", body);
    expect(signatureIdentity(NOW, "k1", Buffer.from(body))).toBe(one);
    expect(signatureIdentity(NOW + 1, "k1", body)).not.toBe(one);
    expect(signatureIdentity(NOW, "k2", body)).not.toBe(one);
    expect(signatureIdentity(NOW, "k1", Buffer.concat([body, Buffer.from(" ")]))).not.toBe(one);
  });
});
