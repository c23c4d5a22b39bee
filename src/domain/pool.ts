/**
 * IPPool and OverlappingRangeIPReservation data as upstream whereabouts 0.9 writes it: object
 * names, and the pool ⇄ reservation-list conversion.
 */
import { type Cidr, type IPAddress, addOffset, cidrAddress, formatIP, parseCidr, parseIP } from "./ip.ts"
import { intern, internOptional } from "./intern.ts"
import { isRecord } from "./json.ts"

/** An entry of an IPPool's `spec.allocations`, keyed by its offset. */
export interface IPAllocation {
  readonly id: string
  readonly podref: string
  readonly ifname?: string | undefined
}

/** `normalize(range)`: a trailing ":" gets a "0", then ":" and "/" become "-". */
export const normalizeRange = (range: string): string =>
  (range.endsWith(":") ? `${range}0` : range).replaceAll(":", "-").replaceAll("/", "-")

/** The IPPool name for a range (as normalised by the IPAM config) and a network name ("" = unnamed). */
export const poolName = (range: string, networkName: string): string =>
  networkName === "" ? normalizeRange(range) : `${networkName}-${normalizeRange(range)}`

/** The OverlappingRangeIPReservation name of an IP on a network ("" = unnamed): normalised as a range is. */
export const reservationName = (ip: IPAddress, networkName: string): string => poolName(formatIP(ip), networkName)

const ipFromNormalized = (text: string): IPAddress | undefined =>
  text.includes(".") ? parseIP(text) : text.includes("-") ? parseIP(text.replaceAll("-", ":")) : undefined

/**
 * Every (network name, IP) a reservation name can stand for, widest IP first. Names are
 * ambiguous when network names contain "-"; callers pick with the network names they know.
 */
export const parseReservationName = (
  name: string
): ReadonlyArray<{ readonly networkName: string; readonly ip: IPAddress }> => {
  const out: Array<{ networkName: string; ip: IPAddress }> = []
  const whole = ipFromNormalized(name)
  if (whole !== undefined) out.push({ networkName: "", ip: whole })
  for (let i = name.indexOf("-"); i >= 0; i = name.indexOf("-", i + 1)) {
    const ip = ipFromNormalized(name.slice(i + 1))
    if (ip !== undefined && i > 0) out.push({ networkName: name.slice(0, i), ip })
  }
  return out
}

/** The network name encoded in a pool's name, or undefined if the name does not follow the convention. */
export const poolNetworkName = (name: string, range: string): string | undefined => {
  const suffix = normalizeRange(range)
  if (name === suffix) return ""
  return name.endsWith(`-${suffix}`) ? name.slice(0, name.length - suffix.length - 1) : undefined
}

/** What the controller keeps of a reservation: its name (the IP), version and owner (nothing reads the rest). */
export interface ReservationRecord {
  readonly name: string
  readonly resourceVersion: string | undefined
  readonly podref: string
}

export interface PoolEntry {
  /** The allocation's offset from the range's address, as written (a decimal). */
  readonly key: string
  readonly ip: IPAddress
  readonly id: string
  readonly podref: string
  readonly ifname: string | undefined
}

export interface ParsedPool {
  readonly name: string
  readonly range: string
  /** spec.range as written; offsets count from its address. Undefined when the range is invalid. */
  readonly cidr: Cidr | undefined
  readonly entries: ReadonlyArray<PoolEntry>
  /** Entries that cannot be read: their key, and why. */
  readonly invalid: ReadonlyArray<{ readonly key: string; readonly reason: string }>
}

const decimal = /^(0|[1-9][0-9]*)$/

const isAllocation = (a: unknown): a is IPAllocation =>
  isRecord(a) &&
  typeof a["id"] === "string" &&
  // Upstream's reconciler skips entries without a podref; freeing them could free a live container's IP.
  typeof a["podref"] === "string" &&
  a["podref"] !== "" &&
  (a["ifname"] === undefined || typeof a["ifname"] === "string")

/** Turns a pool into its reservation list; bad offsets and entries are reported, never fatal. */
export const parsePool = (
  pool: {
    readonly metadata: { readonly name: string }
    readonly spec: { readonly range: string; readonly allocations: Readonly<Record<string, unknown>> }
  },
  previous?: ParsedPool
): ParsedPool => {
  const { name } = pool.metadata
  const { range, allocations } = pool.spec
  const cidr = parseCidr(range)
  const keys = Object.keys(allocations)
  if (cidr === undefined) {
    return { name, range, cidr, entries: [], invalid: keys.map((key) => ({ key, reason: `pool range "${range}" is not a CIDR` })) }
  }
  const base = cidrAddress(cidr)
  const entries: Array<PoolEntry> = []
  const invalid: Array<ParsedPool["invalid"][number]> = []
  // A pool's update changes a few entries of thousands: the unchanged ones are the previous
  // version's objects, so a cache that keeps the new version keeps no new copies of them.
  const before = previous !== undefined && previous.range === range ? new Map(previous.entries.map((e) => [e.key, e] as const)) : undefined
  for (const key of keys) {
    const a = allocations[key]
    if (!decimal.test(key)) {
      invalid.push({ key, reason: "offset is not a non-negative decimal integer" })
      continue
    }
    if (!isAllocation(a)) {
      invalid.push({ key, reason: "allocation lacks a string id or a non-empty podref" })
      continue
    }
    const same = before?.get(key)
    if (same !== undefined && same.id === a.id && same.podref === a.podref && same.ifname === a.ifname) {
      entries.push(same)
      continue
    }
    const ip = addOffset(base, BigInt(key))
    if (ip === undefined) {
      invalid.push({ key, reason: `offset leaves the address family of ${range}` })
      continue
    }
    // Podrefs, interface names and container ids (Multus passes the sandbox's id to each attachment) repeat: keep one copy.
    entries.push({ key, ip, id: intern(a.id), podref: intern(a.podref), ifname: internOptional(a.ifname) })
  }
  return { name, range, cidr, entries, invalid }
}
