/** An error as one log field: its message, or the value itself when something else was thrown. */
export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === "string" ? err : JSON.stringify(err);
}
