import type { Redis } from "iovalkey";
import type { UsedSignatures } from "../pay/used-signatures.js";

export const USED_SIGNATURE_KEY_PREFIX = "modelgate:sig:";

/**
 * The memory of used payment signatures in Valkey, shared by every replica:
 * `SET NX` is the atomic claim (of two replicas claiming one signature, one
 * wins), and the key expires when the signature's timestamp leaves the
 * tolerance window, after which the timestamp check refuses it anyway.
 */
export class ValkeyUsedSignatures implements UsedSignatures {
  constructor(private readonly client: Redis) {}

  async claim(id: string, expiresAtMs: number): Promise<boolean> {
    const answer = await this.client.set(
      USED_SIGNATURE_KEY_PREFIX + id,
      "1",
      "PXAT",
      Math.max(1, Math.ceil(expiresAtMs)),
      "NX",
    );
    return answer === "OK";
  }

  async release(id: string): Promise<void> {
    await this.client.del(USED_SIGNATURE_KEY_PREFIX + id);
  }
}
