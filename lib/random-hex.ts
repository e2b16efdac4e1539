import { randomFillSync } from "node:crypto";

/**
 * Random hex strings for ids on the request path. Each call to
 * crypto.randomBytes enters the native entropy source; ids are drawn instead
 * from a pool refilled 4 KiB at a time, which is what crypto.randomUUID does
 * internally too. The bytes are as random as randomBytes'; only the number
 * of calls into the source changes.
 */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let offset = POOL_BYTES;

export function randomHex(bytes: number): string {
  if (bytes > POOL_BYTES) throw new RangeError(`randomHex: at most ${POOL_BYTES} bytes`);
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const hex = pool.toString("hex", offset, offset + bytes);
  offset += bytes;
  return hex;
}
