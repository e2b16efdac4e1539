import { FetchError } from "./errors.js";

/**
 * Names the component keeps for itself inside a destination folder. A source
 * that lists one of them would overwrite our bookkeeping, so it is refused.
 */
export const MARKER_FILE = ".modelgate-fetch.json";
export const STAGING_STATE_DIR = ".modelgate-staging";

/**
 * Turns a file name from a listing (a remote, untrusted source) into a clean
 * relative POSIX path, or throws `unsafe_path`. A malicious listing must not
 * be able to write outside the destination, whatever it names.
 */
export function safeRelativePath(name: string): string {
  const refuse = (why: string): never => {
    throw new FetchError("unsafe_path", `refusing file name "${printable(name)}": ${why}`);
  };
  if (name.length === 0) refuse("empty name");
  if (name.includes("\0")) refuse("contains a NUL character");
  // A backslash is a separator on Windows and a trap everywhere else.
  if (name.includes("\\")) refuse("contains a backslash");
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) refuse("absolute path");
  const segments = name.split("/").filter((s) => s !== "" && s !== ".");
  if (segments.some((s) => s === "..")) refuse('contains a ".." segment');
  if (segments.length === 0) refuse("names no file");
  const first = segments[0];
  if (first === MARKER_FILE || first === STAGING_STATE_DIR) {
    refuse("the name is reserved by modelgate");
  }
  return segments.join("/");
}

/** Escapes control characters so an error message stays one printable line. */
function printable(name: string): string {
  return [...name]
    .map((c) => {
      const code = c.charCodeAt(0);
      return code < 0x20 || code === 0x7f ? `\\x${code.toString(16).padStart(2, "0")}` : c;
    })
    .join("");
}
