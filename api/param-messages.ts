/**
 * What a rejection says of a request's parameter, one wording per mistake, so
 * that every route (Responses, Files, Batch, usage) names the same mistake the
 * same way, as the OpenAI API words it where it has one.
 */
export const paramMessages = {
  /** A required field or form part that is absent. */
  missing: (param: string): string => `Missing required parameter: '${param}'.`,
  /** A one-value query parameter sent more than once. */
  repeated: (param: string): string => `'${param}' is given more than once.`,
};
