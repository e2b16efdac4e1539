import { readFile } from "node:fs/promises";
import { formatPaySignature, signPayload } from "../gateway/pay/signature.js";

/**
 * `modelgate pay sign`: the `pay-signature` header value for a body, as a
 * payment provider would sign it. For trying the payment route by hand.
 */
export async function runPaySign(flags: {
  kid: string;
  secretFile: string;
  body?: string;
  bodyFile?: string;
}): Promise<number> {
  const secret = (await readFile(flags.secretFile, "utf8")).trim();
  const body =
    flags.bodyFile !== undefined
      ? await readFile(flags.bodyFile)
      : flags.body !== undefined
        ? Buffer.from(flags.body)
        : null;
  if (!body) {
    process.stderr.write("modelgate pay sign: give the exact body with --body or --body-file\n");
    return 2;
  }
  const t = Math.floor(Date.now() / 1000);
  process.stdout.write(
    `${formatPaySignature({ t, kid: flags.kid, v1: [signPayload(body, secret)] })}\n`,
  );
  return 0;
}
