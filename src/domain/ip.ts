/**
 * IP addresses and CIDRs for both families, as plain values (family + bigint). IPv6 parsing and
 * text come from ip-num (a dotted quad is four numbers, read here); BigInt arithmetic keeps ranges
 * wider than /64 addressable (upstream's uint64 offsets stop at /65).
 */
import { IPv6, Validator, collapseIPv6Number } from "ip-num"

export type Family = 4 | 6

export interface IPAddress {
  readonly family: Family
  readonly value: bigint
}

/** A CIDR as written: `address` keeps the host bits (whereabouts offsets count from it). */
export interface Cidr {
  readonly family: Family
  readonly address: bigint
  readonly prefix: number
}

export const bitsOf = (family: Family): 32 | 128 => (family === 4 ? 32 : 128)

const maxOf = (family: Family): bigint => (family === 4 ? 0xffffffffn : (1n << 128n) - 1n)

const decimalOctet = /^[0-9]{1,3}$/

/** Parses an IPv4 (leading zeros accepted, read as decimal) or IPv6 address; undefined if invalid. */
export const parseIP = (text: string): IPAddress | undefined => {
  if (text.includes(".") && !text.includes(":")) {
    const octets = text.split(".")
    if (octets.length !== 4 || !octets.every((o) => decimalOctet.test(o))) return undefined
    // Leading zeros are decimal: whereabouts (Go's ParseIPSloppy) reads "010" as 10.
    const [a, b, c, d] = octets.map(Number) as [number, number, number, number]
    if (a > 255 || b > 255 || c > 255 || d > 255) return undefined
    return { family: 4, value: BigInt(((a << 24) | (b << 16) | (c << 8) | d) >>> 0) }
  }
  if (!text.includes(":") || text.includes("%") || /\s/.test(text)) return undefined
  if (!Validator.isValidIPv6String(text)[0]) return undefined
  try {
    return { family: 6, value: IPv6.fromString(text).value }
  } catch {
    return undefined
  }
}

/** Parses as Go 1.17+'s net.ParseIP, as whereabouts parses excludes and `ipRanges` bounds: an IPv4 octet "010" is refused. */
export const parseIPStrict = (text: string): IPAddress | undefined =>
  text.includes(".") && !text.includes(":") && text.split(".").some((o) => o.length > 1 && o.startsWith("0")) ? undefined : parseIP(text)

/** Formats like Go's net.IP.String(): dotted quad, or RFC 5952 compressed lowercase IPv6. */
export const formatIP = (ip: IPAddress): string => {
  if (ip.family === 4) {
    const v = Number(ip.value)
    return `${(v >>> 24) & 255}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`
  }
  const groups: Array<string> = []
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(((ip.value >> shift) & 0xffffn).toString(16))
  return collapseIPv6Number(groups.join(":"))
}

/** Parses `address/prefix` strictly (decimal prefix within the family's bits); undefined if invalid. */
export const parseCidr = (text: string): Cidr | undefined => {
  const slash = text.indexOf("/")
  if (slash < 0 || slash !== text.lastIndexOf("/")) return undefined
  const ip = parseIP(text.slice(0, slash))
  const prefixText = text.slice(slash + 1)
  if (ip === undefined || !/^[0-9]{1,3}$/.test(prefixText)) return undefined
  const prefix = Number(prefixText)
  if (prefix > bitsOf(ip.family)) return undefined
  return { family: ip.family, address: ip.value, prefix }
}

const hostMask = (c: Cidr): bigint => (1n << BigInt(bitsOf(c.family) - c.prefix)) - 1n

/** The network (first) address of a CIDR. */
export const networkOf = (c: Cidr): bigint => c.address & ~hostMask(c) & maxOf(c.family)

/** The last (broadcast) address of a CIDR. */
export const lastOf = (c: Cidr): bigint => networkOf(c) | hostMask(c)

/** The CIDR in network form, e.g. 192.168.2.230/24 → 192.168.2.0/24. */
export const toNetworkForm = (c: Cidr): Cidr => ({ ...c, address: networkOf(c) })

/** Text of a CIDR as Go's IPNet.String() writes it (network form). */
export const formatCidr = (c: Cidr): string => `${formatIP({ family: c.family, value: networkOf(c) })}/${c.prefix}`

/** True when `ip` lies inside `c`. */
export const cidrContains = (c: Cidr, ip: IPAddress): boolean =>
  ip.family === c.family && ip.value >= networkOf(c) && ip.value <= lastOf(c)

/** First and last usable address (network and broadcast excluded, IPv6 too); undefined for /31 /32 /127 /128. */
export const usableRange = (c: Cidr): { readonly first: bigint; readonly last: bigint } | undefined =>
  bitsOf(c.family) - c.prefix > 1 ? { first: networkOf(c) + 1n, last: lastOf(c) - 1n } : undefined

/** base + offset, or undefined when it leaves the address family. */
export const addOffset = (base: IPAddress, offset: bigint): IPAddress | undefined => {
  const value = base.value + offset
  return offset < 0n || value > maxOf(base.family) ? undefined : { family: base.family, value }
}

/** The address written in a CIDR (host bits kept). */
export const cidrAddress = (c: Cidr): IPAddress => ({ family: c.family, value: c.address })

export const ipEquals = (a: IPAddress, b: IPAddress): boolean => a.family === b.family && a.value === b.value

/** A string key unique per address, cheaper than formatting. */
export const ipKey = (ip: IPAddress): string => `${ip.family}:${ip.value.toString(16)}`
