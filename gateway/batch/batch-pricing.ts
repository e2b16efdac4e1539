import { costOf } from "../metering/cost.js";
import type { ModelPrices } from "../registry/registry.js";

const DECIMAL = /^([0-9]+)(?:\.([0-9]+))?$/;

/**
 * A price with a fraction taken off, exactly: `price × (1 − discount)` in
 * integers scaled by both decimals, so a half-price batch request costs
 * exactly half, not half rounded in floating point.
 */
export function discountedPrice(price: string, discount: string): string {
  const p = DECIMAL.exec(price);
  const d = DECIMAL.exec(discount);
  if (!p || !d) throw new Error(`not a decimal: ${JSON.stringify(p ? discount : price)}`);
  const pDecimals = p[2] ?? "";
  const dDecimals = d[2] ?? "";
  const scaledPrice = BigInt(p[1]! + pDecimals);
  const one = 10n ** BigInt(dDecimals.length);
  const scaledDiscount = BigInt(d[1]! + dDecimals);
  if (scaledDiscount > one) throw new Error(`a discount over 1: ${discount}`);
  const value = scaledPrice * (one - scaledDiscount);
  const decimals = pDecimals.length + dDecimals.length;
  const digits = value.toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}

/** What one batch request cost: the model's prices with its batch discount. */
export function batchCostOf(
  tokens: { inputTokens: number; outputTokens: number },
  prices: ModelPrices,
): string {
  return costOf(tokens, {
    inputPerMillionTokens: discountedPrice(prices.inputPerMillionTokens, prices.batchDiscount),
    outputPerMillionTokens: discountedPrice(prices.outputPerMillionTokens, prices.batchDiscount),
  });
}
