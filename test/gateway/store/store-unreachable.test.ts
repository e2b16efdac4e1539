import { describe, expect, it } from "vitest";
import { isStoreUnreachable } from "../../../gateway/store/store-unreachable.js";

/** Which failed store calls the API answers 503 (retry) rather than 500 (a bug). */
describe("isStoreUnreachable", () => {
  const sqlError = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });

  it("is true for the database away, busy or restarting", () => {
    for (const code of ["08006", "08001", "53300", "57P01", "57P03", "40001", "40P01", "55P03"]) {
      expect(isStoreUnreachable(sqlError(code)), code).toBe(true);
    }
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), {
      code: "ECONNREFUSED",
      syscall: "connect",
    });
    expect(isStoreUnreachable(refused)).toBe(true);
    expect(isStoreUnreachable(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(isStoreUnreachable(new Error("timeout exceeded when trying to connect"))).toBe(true);
    expect(isStoreUnreachable(new Error("Query read timeout"))).toBe(true);
    // Wrapped, as a caller that adds context does.
    expect(isStoreUnreachable(new Error("listing files", { cause: refused }))).toBe(true);
  });

  it("is false for a call that was itself wrong, and for anything not from the store", () => {
    for (const code of ["42601", "42P01", "22021", "23505", "XX000"]) {
      expect(isStoreUnreachable(sqlError(code)), code).toBe(false);
    }
    expect(isStoreUnreachable(new TypeError("x is undefined"))).toBe(false);
    expect(isStoreUnreachable(undefined)).toBe(false);
    expect(isStoreUnreachable("ECONNREFUSED")).toBe(false);
  });
});
