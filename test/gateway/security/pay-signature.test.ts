import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { formatPaySignature, signPayload } from "../../../gateway/pay/signature.js";
import { SECRETS, startPlatform, type Platform } from "../support/platform.js";
import { footprint, logLinesContaining, rawPost, type Footprint } from "./support.js";

/**
 * The pay-signature through the real gateway (spec 5.2, docs/payment-provider.md):
 * an HMAC over the exact bytes received, keyed by the secret(s) of `kid`, a
 * strict header grammar, and a timestamp that matters only once the digest
 * is genuine. Every refusal is 401 with exactly `{"error":"invalid_pay_signature"}`
 * and goes no further: no allowance check at the provider, no runtime request.
 */

const INVALID_BODY = '{"error":"invalid_pay_signature"}';
const PATH = "/pay/v1/responses";
const BODY = '{"model":"tiny-gpt","input":"A","max_output_tokens":2,"temperature":0}';
const now = () => Math.floor(Date.now() / 1000);
const digest = (raw: string | Buffer, secret: string = SECRETS.k1) =>
  signPayload(Buffer.from(raw), secret);
const header = (parts: string[]) => parts.join(",");

let p: Platform;
let before: Footprint;

beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());
beforeEach(async () => {
  before = await footprint(p);
});

async function expectRefusedWithoutSideEffects(status: number, text: string): Promise<void> {
  expect(status).toBe(401);
  expect(text).toBe(INVALID_BODY);
  expect(await footprint(p)).toEqual(before);
}

async function expectServed(res: Response): Promise<void> {
  expect(res.status, await res.clone().text()).toBe(200);
  expect(res.headers.get("pay-usage")).toMatch(
    /^slug="tiny-gpt", input_tokens=\d+, output_tokens=\d+$/,
  );
  expect(p.provider.ledger.checks.length).toBe(before.providerChecks + 1);
}

interface Forgery {
  guards: string;
  /** The bytes sent; BODY unless given. */
  sent?: string;
  /** The pay-signature header, or null to send none. */
  signature: () => string | null;
}

const v1Of = (raw: string = BODY) => digest(raw);

const forgeries: Forgery[] = [
  // Keys: the secret must be one of the secrets of the kid the header names.
  { guards: "no header at all", signature: () => null },
  { guards: "an empty header", signature: () => "" },
  {
    guards: "a secret nobody configured",
    signature: () => p.sign(BODY, "k1", "not-the-k1-secret-0123456789"),
  },
  { guards: "kid k1 with k2's new secret", signature: () => p.sign(BODY, "k1", SECRETS.k2new) },
  { guards: "kid k1 with k2's old secret", signature: () => p.sign(BODY, "k1", SECRETS.k2old) },
  { guards: "kid k2 with k1's secret", signature: () => p.sign(BODY, "k2", SECRETS.k1) },
  { guards: "an unknown kid with a known secret", signature: () => p.sign(BODY, "k3", SECRETS.k1) },

  // The bytes: whatever was signed is what must arrive, not something that parses alike.
  {
    guards: "the same JSON re-encoded with other whitespace",
    sent: JSON.stringify(JSON.parse(BODY), null, 2),
    signature: () => p.sign(BODY),
  },
  {
    guards: "the same JSON with its keys in another order",
    sent: '{"input":"A","model":"tiny-gpt","max_output_tokens":2,"temperature":0}',
    signature: () => p.sign(BODY),
  },
  {
    guards: "the same JSON with a unicode escape (\\u0041 for A)",
    sent: BODY.replace('"A"', '"\\u0041"'),
    signature: () => p.sign(BODY),
  },
  {
    guards: "a body truncated mid-JSON",
    sent: BODY.slice(0, -12),
    signature: () => p.sign(BODY),
  },
  {
    guards: "a body truncated to still-valid JSON (signed with a trailing newline)",
    sent: BODY,
    signature: () => p.sign(`${BODY}\n`),
  },
  // Sent as an empty body: the signature is checked before the body is judged.
  { guards: "an empty body", sent: "", signature: () => p.sign(BODY) },
  { guards: "an extra trailing space", sent: `${BODY} `, signature: () => p.sign(BODY) },
  { guards: "an extra trailing newline", sent: `${BODY}\n`, signature: () => p.sign(BODY) },

  // Timestamps: only a genuine digest learns that its time is the problem (402); a forged one is 401.
  {
    guards: "a wrong digest 301 s in the past",
    signature: () => p.sign(BODY, "k1", SECRETS.k2new, now() - 301),
  },
  {
    guards: "a wrong digest 301 s in the future",
    signature: () => p.sign(BODY, "k1", SECRETS.k2new, now() + 301),
  },

  // The grammar: anything but `t=…,kid=…,v1=…[,v1=…]` is malformed, even with a genuine digest.
  {
    guards: "a duplicate t",
    signature: () => header([`t=${now()}`, `t=${now()}`, "kid=k1", `v1=${v1Of()}`]),
  },
  {
    guards: "a duplicate kid",
    signature: () => header([`t=${now()}`, "kid=k1", "kid=k1", `v1=${v1Of()}`]),
  },
  { guards: "a missing t", signature: () => header(["kid=k1", `v1=${v1Of()}`]) },
  { guards: "a missing kid", signature: () => header([`t=${now()}`, `v1=${v1Of()}`]) },
  { guards: "a missing v1", signature: () => header([`t=${now()}`, "kid=k1"]) },
  {
    guards: "a non-numeric t",
    signature: () => header(["t=yesterday", "kid=k1", `v1=${v1Of()}`]),
  },
  {
    guards: "a t with a fraction",
    signature: () => header([`t=${now()}.0`, "kid=k1", `v1=${v1Of()}`]),
  },
  {
    guards: "a t with a sign",
    signature: () => header([`t=+${now()}`, "kid=k1", `v1=${v1Of()}`]),
  },
  { guards: "an empty v1", signature: () => header([`t=${now()}`, "kid=k1", "v1="]) },
  {
    guards: "a v1 one hex digit short",
    signature: () => header([`t=${now()}`, "kid=k1", `v1=${v1Of().slice(0, -1)}`]),
  },
  {
    guards: "a v1 one hex digit long",
    signature: () => header([`t=${now()}`, "kid=k1", `v1=${v1Of()}0`]),
  },
  {
    guards: "a non-hex v1 of digest length",
    signature: () => header([`t=${now()}`, "kid=k1", `v1=${"z".repeat(64)}`]),
  },
  {
    guards: "the genuine digest in uppercase hex",
    signature: () => header([`t=${now()}`, "kid=k1", `v1=${v1Of().toUpperCase()}`]),
  },
  {
    guards: "spaces after the commas",
    signature: () => [`t=${now()}`, "kid=k1", `v1=${v1Of()}`].join(", "),
  },
  {
    guards: "spaces around the equals signs",
    signature: () => [`t = ${now()}`, "kid = k1", `v1 = ${v1Of()}`].join(","),
  },
  { guards: "a trailing comma", signature: () => `${p.sign(BODY)},` },
  {
    guards: "a future scheme key (v2) alone",
    signature: () => header([`t=${now()}`, "kid=k1", `v2=${v1Of()}`]),
  },
  {
    guards: "more than 8 v1 values, the last one genuine",
    signature: () =>
      formatPaySignature({
        t: now(),
        kid: "k1",
        v1: [...Array.from({ length: 8 }, () => "0".repeat(64)), v1Of()],
      }),
  },
  {
    guards: "percent-encoded CR/LF in the kid (log injection attempt)",
    signature: () => header([`t=${now()}`, "kid=k1%0d%0ax-injected:1", `v1=${v1Of()}`]),
  },
  {
    guards: "a 4 KiB header (over the 2,048-character parse bound, under Node's header limit)",
    signature: () => header([`t=${now()}`, "kid=k1", `v1=${v1Of()}`, `x=${"a".repeat(4096)}`]),
  },
];

describe("pay-signature: refused with exactly the spec's 401 body and no side effects", () => {
  it.each(forgeries)("refuses $guards", async ({ sent, signature }) => {
    const res = await p.pay(sent ?? BODY, { signature: signature() });
    await expectRefusedWithoutSideEffects(res.status, await res.text());
  });

  it("logs why each 401 was refused, which its body does not say, and never the header", async () => {
    const forged = header([`t=${now()}`, "kid=k1", `v1=${"0".repeat(64)}`]);
    const unknownKid = header([`t=${now()}`, "kid=nobody", `v1=${v1Of()}`]);
    for (const [signature, reason] of [
      [forged, "mismatch"],
      [unknownKid, "unknown_kid"],
    ] as const) {
      const res = await p.pay(BODY, { signature });
      expect(res.status).toBe(401);
      await res.text();
      const id = res.headers.get("x-request-id") ?? "no request id";
      const refused = logLinesContaining(p, id).find((l) => l.includes("request refused"));
      expect((JSON.parse(refused ?? "{}") as { reason?: string }).reason).toBe(
        `pay-signature rejected: ${reason}`,
      );
      expect(logLinesContaining(p, signature)).toEqual([]);
    }
  });

  it("refuses two pay-signature header lines, even when both are genuine", async () => {
    // fetch would merge them client-side; node:http sends two lines, which Node
    // joins with ", " on the server: a space, so malformed.
    const genuine = p.sign(BODY);
    const res = await rawPost(p.url, PATH, { "pay-signature": [genuine, genuine] }, BODY);
    await expectRefusedWithoutSideEffects(res.status, res.text);
  });

  it("answers a 64 KiB pay-signature with Node's 431 before any route runs", async () => {
    // Node's default header limit is 16 KiB: such a request never reaches the
    // gateway's handler, so it cannot be a 401 from us; 431 is the honest answer.
    const res = await p.pay(BODY, {
      signature: `${p.sign(BODY)},x=${"a".repeat(64 * 1024)}`,
    });
    expect(res.status).toBe(431);
    expect(await footprint(p)).toEqual(before);
  });
});

describe("pay-signature: genuine signatures are served", () => {
  it("serves a request signed with kid k1", async () => {
    await expectServed(await p.pay(BODY));
  });

  it.each([
    { guards: "the new secret", secret: SECRETS.k2new },
    { guards: "the old secret", secret: SECRETS.k2old },
  ])("serves kid k2 signed with $guards during a rotation", async ({ secret }) => {
    await expectServed(await p.pay(BODY, { signature: p.sign(BODY, "k2", secret) }));
  });

  it("serves two v1 values when only the second is genuine", async () => {
    const signature = formatPaySignature({ t: now(), kid: "k1", v1: ["0".repeat(64), v1Of()] });
    await expectServed(await p.pay(BODY, { signature }));
  });

  it("serves k2 signed with both its secrets at once (one v1 each)", async () => {
    // Bytes of their own: the rotation tests above signed BODY with k2 in this
    // same second, and (t, kid, bytes) is accepted once.
    const raw = `${BODY} `;
    const signature = formatPaySignature({
      t: now(),
      kid: "k2",
      v1: [digest(raw, SECRETS.k2new), digest(raw, SECRETS.k2old)],
    });
    await expectServed(await p.pay(raw, { signature }));
  });

  it("verifies the exact bytes: odd whitespace and escapes signed as sent are served", async () => {
    const odd = '{ "model" : "tiny-gpt",\n\t"input":"\\u0041",  "max_output_tokens":2 }\n';
    await expectServed(await p.pay(odd, { signature: p.sign(odd) }));
  });

  it.each([
    { guards: "290 s in the past", skew: -290 },
    { guards: "290 s in the future", skew: 290 },
  ])("serves a genuine signature $guards (inside the 300 s tolerance)", async ({ skew }) => {
    await expectServed(await p.pay(BODY, { t: now() + skew }));
  });
});

describe("pay-signature: a genuine but stale timestamp is a 402 denial", () => {
  it.each([
    { guards: "301 s in the past", skew: -301 },
    { guards: "301 s in the future", skew: 301 },
  ])("denies a genuine signature $guards with pay_signature_expired", async ({ skew }) => {
    const res = await p.pay(BODY, { t: now() + skew });
    expect(res.status).toBe(402);
    const { error } = (await res.json()) as { error: Record<string, string> };
    expect(error).toEqual({
      message: error.message,
      type: "authentication_error",
      param: "pay-signature",
      code: "pay_signature_expired",
    });
    expect(error.message).toContain("at most 300 s");
    expect(await footprint(p)).toEqual(before);
  });

  it("never fails open on a replay: a 10-minute-old request is 402 while the provider is down", async () => {
    await p.provider.setMode("down");
    try {
      const replay = await p.pay(BODY, { t: now() - 600 });
      expect(replay.status).toBe(402);
      expect(((await replay.json()) as { error: { code: string } }).error.code).toBe(
        "pay_signature_expired",
      );
      expect(await footprint(p)).toEqual(before);

      // The contrast: a fresh request in the same outage does fail open (spec 5.2),
      // so the 402 above comes from the timestamp, not from the outage.
      const fresh = await p.pay(BODY);
      expect(fresh.status).toBe(200);
      expect((await footprint(p)).gptRequests).toBe(before.gptRequests + 1);
    } finally {
      await p.provider.setMode("allow");
    }
  });
});
