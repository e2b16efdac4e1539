import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "pg-connection-string";
import { describe, expect, it } from "vitest";
import { withDatabaseTls } from "../../../gateway/store/database-url.js";

describe("the database URL with its TLS settings", () => {
  const url = "postgres://app:p%40ss@db.acme.svc:5432/app?application_name=modelgate";

  it("leaves the URL as it is without settings", () => {
    expect(withDatabaseTls(url, {})).toBe(url);
  });

  it("sets sslmode and sslrootcert, which the driver reads (the CA file's contents)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "db-ca-"));
    const ca = join(dir, "ca.crt");
    await writeFile(ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    const out = withDatabaseTls(url, { sslMode: "verify-full", caFile: ca });
    const config = parse(out);
    expect(config).toMatchObject({
      host: "db.acme.svc",
      user: "app",
      password: "p@ss",
      database: "app",
      application_name: "modelgate",
    });
    const ssl = config.ssl as { ca?: string };
    expect(ssl.ca).toContain("BEGIN CERTIFICATE");
    // A setting given apart replaces the URL's own.
    expect(
      new URL(
        withDatabaseTls(`${url}&sslmode=require`, { sslMode: "disable" }),
      ).searchParams.getAll("sslmode"),
    ).toEqual(["disable"]);
    expect(parse(withDatabaseTls(url, { sslMode: "disable" })).ssl).toBe(false);
  });
});
