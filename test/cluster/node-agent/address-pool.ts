import { allocateAddress, type Cidr } from "./cidr.js";

/** The node's pod addresses in use; the decisions are cidr.ts's. */
export class AddressPool {
  private readonly used = new Set<string>();

  constructor(private readonly cidr: Cidr) {}

  allocate(preferred: string | undefined): string | undefined {
    const ip = allocateAddress(this.cidr, this.used, preferred);
    if (ip !== undefined) this.used.add(ip);
    return ip;
  }

  release(ip: string): void {
    this.used.delete(ip);
  }
}
