/**
 * IPv4 arithmetic for the node's pod range. Pure: the agent's address
 * bookkeeping and the tests both rely on the same rules (the network
 * address, the gateway and the broadcast address are never handed out).
 */
export interface Cidr {
  /** The network address as an unsigned 32-bit number. */
  base: number;
  prefix: number;
}

export function parseCidr(text: string): Cidr {
  const match = /^(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})$/.exec(text.trim());
  if (!match) throw new Error(`not an IPv4 CIDR: ${text}`);
  const prefix = Number(match[2]);
  if (prefix < 8 || prefix > 30) throw new Error(`prefix /${prefix} out of range 8..30: ${text}`);
  const address = parseIp(match[1]!);
  const base = (address & mask(prefix)) >>> 0;
  if (base !== address)
    throw new Error(`${text} has host bits set; did you mean ${formatCidr({ base, prefix })}?`);
  return { base, prefix };
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIp(cidr.base)}/${cidr.prefix}`;
}

export function parseIp(text: string): number {
  const parts = text.split(".").map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) {
    throw new Error(`not an IPv4 address: ${text}`);
  }
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

export function formatIp(value: number): string {
  return [24, 16, 8, 0].map((shift) => (value >>> shift) & 255).join(".");
}

export function contains(cidr: Cidr, ip: string): boolean {
  let value: number;
  try {
    value = parseIp(ip);
  } catch {
    return false;
  }
  return (value & mask(cidr.prefix)) >>> 0 === cidr.base;
}

/** The first host address: the host side of every pod's veth, and the node's address. */
export function gatewayOf(cidr: Cidr): string {
  return formatIp(cidr.base + 1);
}

/**
 * The address for a new pod: the one it had before (an agent restart must
 * not renumber a pod the API already shows with an IP) when it is still free,
 * else the lowest free host address; undefined when the range is full.
 */
export function allocateAddress(
  cidr: Cidr,
  used: ReadonlySet<string>,
  preferred?: string,
): string | undefined {
  const gateway = gatewayOf(cidr);
  const usable = (ip: string): boolean => ip !== gateway && !used.has(ip) && isHost(cidr, ip);
  if (preferred !== undefined && usable(preferred)) return preferred;
  const size = 2 ** (32 - cidr.prefix);
  for (let offset = 2; offset < size - 1; offset++) {
    const ip = formatIp(cidr.base + offset);
    if (usable(ip)) return ip;
  }
  return undefined;
}

function isHost(cidr: Cidr, ip: string): boolean {
  if (!contains(cidr, ip)) return false;
  const offset = parseIp(ip) - cidr.base;
  return offset > 0 && offset < 2 ** (32 - cidr.prefix) - 1;
}

function mask(prefix: number): number {
  return prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
}
