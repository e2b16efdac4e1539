import { STATUS_CODES } from "node:http";

/**
 * The reason phrase of the one status the spec uses that Node's table lacks
 * (section 7: 420, the input over the model's token limit), which Node would
 * send as `420 unknown`. Node reads the table whenever a response's head is
 * written, so one entry serves every path that answers 420: the runtime's
 * error edge and the gateway relaying it, whole or before a stream. The
 * phrase is informational (RFC 9110, section 15): clients read the code.
 */
STATUS_CODES[420] ??= "Token Limit Exceeded";
