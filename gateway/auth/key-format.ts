import { hash, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";

/**
 * API key format: `mg_live_<32 base62 random><6 base62 checksum>`.
 *
 * - The prefix makes a leaked key recognizable to secret scanners and to
 *   people, and says which product it belongs to.
 * - 32 base62 characters carry about 190 bits of entropy, far beyond guessing.
 * - The checksum is CRC32 (node:zlib) of the random part, written as 6 base62
 *   characters (62^6 > 2^32, so the encoding is exact and unique). CRC32
 *   detects every single-character change (any burst of up to 32 bits), so a
 *   mistyped or truncated key is rejected without hashing or a lookup. It is
 *   not a secret and not a MAC: it guards against typos, not forgery; the
 *   forgery guard is the 190 random bits.
 */
export const KEY_PREFIX = "mg_live_";
export const RANDOM_LENGTH = 32;
export const CHECKSUM_LENGTH = 6;
export const KEY_LENGTH = KEY_PREFIX.length + RANDOM_LENGTH + CHECKSUM_LENGTH;

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_PATTERN = /^[0-9A-Za-z]+$/;

/** Hash prefix in the keys file, so another algorithm can be added later. */
export const HASH_SCHEME = "sha256";

export type KeyFormatResult = "ok" | "malformed";

/** Random base62 characters without modulo bias (rejection sampling). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 * 62: bytes at or above it would favour the first characters.
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** CRC32 of the random part, as exactly `CHECKSUM_LENGTH` base62 characters. */
export function checksumOf(randomPart: string): string {
  let value = crc32(randomPart);
  let out = "";
  for (let i = 0; i < CHECKSUM_LENGTH; i += 1) {
    out = BASE62[value % 62]! + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/**
 * Pure format check: prefix, length, alphabet and checksum. Runs before any
 * hashing, so a garbled header costs microseconds and touches no key data.
 */
export function checkKeyFormat(key: string): KeyFormatResult {
  if (key.length !== KEY_LENGTH || !key.startsWith(KEY_PREFIX)) return "malformed";
  const body = key.slice(KEY_PREFIX.length);
  if (!BODY_PATTERN.test(body)) return "malformed";
  const randomPart = body.slice(0, RANDOM_LENGTH);
  const checksum = body.slice(RANDOM_LENGTH);
  return checksumOf(randomPart) === checksum ? "ok" : "malformed";
}

/**
 * The stored form of a key: sha256 of the whole key, hex. A plain fast hash
 * is right here, unlike for passwords: the key has ~190 bits of randomness, so
 * a leaked keys file cannot be brute-forced whatever the hash speed, and a slow
 * hash would only add latency to every request.
 */
export function hashApiKey(key: string): string {
  // The one-shot form: no Hash object per request.
  return hash("sha256", key, "hex");
}

/** `sha256:<hex>`, the form written in the keys file. */
export function storedHash(key: string): string {
  return `${HASH_SCHEME}:${hashApiKey(key)}`;
}

/** A key id: public, safe to log, names the key in the keys file. */
export function generateKeyId(): string {
  return `key_${randomBase62(16)}`;
}

export interface GeneratedKey {
  /** The secret. Shown once to the person creating it; never stored or logged. */
  key: string;
  id: string;
  /** `sha256:<hex>` for the keys file. */
  hash: string;
}

export function generateApiKey(options: { id?: string } = {}): GeneratedKey {
  const randomPart = randomBase62(RANDOM_LENGTH);
  const key = `${KEY_PREFIX}${randomPart}${checksumOf(randomPart)}`;
  return { key, id: options.id ?? generateKeyId(), hash: storedHash(key) };
}
