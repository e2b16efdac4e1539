import { EXPIRES_AFTER_SECONDS, type FilePurpose } from "../../api/files.js";
import { HttpErrors } from "../../lib/http/http-errors.js";

/**
 * Without `expires_after`, a `batch` upload expires after thirty days, as
 * OpenAI's do; any other upload is kept until deleted.
 */
const BATCH_DEFAULT_SECONDS = 2_592_000;

/** The `expires_after[…]` fields of an upload form, as sent (text), when sent. */
export interface ExpiresAfterFields {
  anchor?: string;
  seconds?: string;
}

/**
 * When an upload expires: `created_at` plus the seconds asked for, or the
 * purpose's default when no seconds are sent. `created_at` is the only
 * anchor, so it may be left out; another anchor, or seconds out of bounds,
 * is a 400 naming the field.
 */
export function uploadExpiry(
  purpose: FilePurpose,
  fields: ExpiresAfterFields,
  createdAt: Date,
): Date | null {
  if (fields.anchor !== undefined && fields.anchor !== "created_at") {
    throw HttpErrors.invalidRequest(
      `Invalid 'expires_after[anchor]': must be 'created_at'.`,
      "expires_after[anchor]",
    );
  }
  if (fields.seconds === undefined) {
    return purpose === "batch" ? after(createdAt, BATCH_DEFAULT_SECONDS) : null;
  }
  const seconds = Number(fields.seconds);
  const { min, max } = EXPIRES_AFTER_SECONDS;
  if (!/^\d+$/.test(fields.seconds) || seconds < min || seconds > max) {
    throw HttpErrors.invalidRequest(
      `Invalid 'expires_after[seconds]': must be an integer from ${min} to ${max}.`,
      "expires_after[seconds]",
    );
  }
  return after(createdAt, seconds);
}

const after = (date: Date, seconds: number) => new Date(date.getTime() + seconds * 1000);
