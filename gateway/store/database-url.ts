/**
 * The PostgreSQL URL with the TLS settings given apart from it: libpq's
 * `sslmode` and `sslrootcert` parameters, which the driver (pg, through
 * pg-connection-string) reads, the CA file included. A setting given here
 * replaces the URL's own; none given leaves the URL as it is. Pure.
 *
 * The driver treats `require` and `verify-ca` as `verify-full` (it checks
 * the certificate and the host name): a server with a private CA needs the
 * CA file (CloudNativePG: the `<cluster>-ca` Secret's `ca.crt`).
 */
export interface DatabaseTls {
  sslMode?: "disable" | "require" | "verify-ca" | "verify-full" | undefined;
  caFile?: string | undefined;
}

export function withDatabaseTls(url: string, tls: DatabaseTls): string {
  if (!tls.sslMode && !tls.caFile) return url;
  const parsed = new URL(url);
  if (tls.sslMode) parsed.searchParams.set("sslmode", tls.sslMode);
  if (tls.caFile) parsed.searchParams.set("sslrootcert", tls.caFile);
  return parsed.toString();
}
