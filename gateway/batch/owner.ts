/**
 * Who owns a file or a batch: the account of the key that made it and the
 * project the request was scoped to (none: the account's own). Every query
 * of another owner's id finds nothing, so it is a 404 like a missing one.
 */
export interface Owner {
  readonly account: string;
  readonly project: string | null;
}
