/**
 * What a request costs at a model's prices, exactly: prices are decimals per
 * million tokens (`pricing.inputPerMillionTokens` of the InferenceModel, such
 * as "0.50"), and floating point would round a fraction of a cent on every
 * request. The sum is done in integers scaled by the prices' decimals and
 * returned as a decimal string, as PostgreSQL's `numeric` stores it.
 */
export interface TokenPrices {
  inputPerMillionTokens: string;
  outputPerMillionTokens: string;
}

const PRICE = /^([0-9]+)(?:\.([0-9]+))?$/;

export function costOf(
  tokens: { inputTokens: number; outputTokens: number },
  prices: TokenPrices,
): string {
  const input = parsePrice(prices.inputPerMillionTokens);
  const output = parsePrice(prices.outputPerMillionTokens);
  const scale = Math.max(input.decimals.length, output.decimals.length);
  const scaled = (price: { whole: string; decimals: string }) =>
    BigInt(price.whole + price.decimals.padEnd(scale, "0"));
  const total =
    BigInt(tokens.inputTokens) * scaled(input) + BigInt(tokens.outputTokens) * scaled(output);
  // `total` is the cost times 10^scale per million tokens: 10^(scale + 6) in all.
  return formatScaled(total, scale + 6);
}

function parsePrice(price: string): { whole: string; decimals: string } {
  const match = PRICE.exec(price);
  if (!match) throw new Error(`not a price: ${JSON.stringify(price)}`);
  return { whole: match[1]!, decimals: match[2] ?? "" };
}

function formatScaled(value: bigint, decimals: number): string {
  const digits = value.toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}
