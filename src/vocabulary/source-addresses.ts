import ipaddr from 'ipaddr.js';

/**
 * The sender a per-source budget counts a request under: an IPv4 address as itself, an IPv4-mapped
 * IPv6 address (`::ffff:203.0.113.7`, what a dual-stack socket reports) as that IPv4 address, and any
 * other IPv6 address as its /64 (`2001:db8:1:2::/64`), whatever its spelling or zone. A /64 is the
 * smallest network a host or a household is given, so counting each of its 2⁶⁴ addresses apart would hand
 * one sender as many budgets. Anything that is not an address (none known) is kept as it is.
 */
export function toSourceKey(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  // The first four groups are the /64: the rest is the interface id, the sender's own to pick.
  const network = (parsed as ipaddr.IPv6).parts.map((part, group) => (group < 4 ? part : 0));
  return `${new ipaddr.IPv6(network).toString()}/64`;
}
