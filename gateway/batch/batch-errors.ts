import { defineError } from "../../lib/coded-error.js";

/**
 * Errors of the Files and Batch routes (codes listed in docs/errors.md).
 * Another owner's file or batch is answered exactly as a missing one.
 */
export const BatchErrors = {
  fileNotFound: defineError(
    "file_not_found",
    404,
    "invalid_request_error",
    (id: string, _param: string) => `No such File object: ${id}`,
    (_id, param) => ({ param }),
  ),
  batchNotFound: defineError(
    "batch_not_found",
    404,
    "invalid_request_error",
    (id: string, _param: string = "batch_id") => `No such Batch object: ${id}`,
    (_id, param = "batch_id") => ({ param }),
  ),
  fileTooLarge: defineError(
    "file_too_large",
    413,
    "invalid_request_error",
    (limitBytes: number) => `The file is larger than the limit of ${limitBytes} bytes.`,
    () => ({ param: "file" }),
  ),
  tooManyLines: defineError(
    "too_many_lines",
    400,
    "invalid_request_error",
    (limitLines: number) => `A batch file may hold at most ${limitLines} lines (requests).`,
    () => ({ param: "file" }),
  ),
  batchNotCancellable: defineError(
    "batch_not_cancellable",
    400,
    "invalid_request_error",
    (status: string) => `A batch that is ${status} cannot be cancelled.`,
    () => ({ param: "batch_id" }),
  ),
} as const;
