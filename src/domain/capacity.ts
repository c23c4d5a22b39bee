/**
 * How many addresses a whereabouts range can hand out, as the 0.9.2 plugin allocates (`GetIPRange`,
 * `IterateForAssignment`): the usable range narrowed by the bounds it honours, minus the excluded
 * subnets, as sorted disjoint bigint intervals (no address is enumerated: a /64 costs as a /30 does).
 */
import { type Cidr, type Family, type IPAddress, lastOf, networkOf, usableRange } from "./ip.ts"
import type { IpRange } from "./ipam-config.ts"

/** An inclusive run of addresses of one family. */
export interface AddressInterval {
  readonly family: Family
  readonly first: bigint
  readonly last: bigint
}

const max = (a: bigint, b: bigint): bigint => (a > b ? a : b)
const min = (a: bigint, b: bigint): bigint => (a < b ? a : b)

const within = (ip: IPAddress | undefined, family: Family, first: bigint, last: bigint): ip is IPAddress =>
  ip !== undefined && ip.family === family && ip.value >= first && ip.value <= last

/** First and last address the plugin may hand out from `range` (upstream's GetIPRange); undefined for /31 /32 /127 /128. */
const allocationWindow = (range: IpRange): { readonly first: bigint; readonly last: bigint } | undefined => {
  const usable = usableRange(range.cidr)
  if (usable === undefined) return undefined
  let { first, last } = usable
  // A bound outside the usable range is ignored, not an error (upstream keeps old configs working);
  // the end is checked against the already narrowed start, so an end below the start is ignored too.
  if (within(range.rangeStart, range.cidr.family, first, last)) first = range.rangeStart.value
  if (within(range.rangeEnd, range.cidr.family, first, last)) last = range.rangeEnd.value
  return { first, last }
}

export const byStart = (a: Pick<AddressInterval, "family" | "first">, b: Pick<AddressInterval, "family" | "first">): number =>
  a.family !== b.family ? a.family - b.family : a.first < b.first ? -1 : a.first > b.first ? 1 : 0

/** `[first, last]` minus the excluded subnets: one sweep over the excludes clipped to the window and sorted. */
const subtractExcludes = (family: Family, first: bigint, last: bigint, exclude: ReadonlyArray<Cidr>): Array<AddressInterval> => {
  const cuts = exclude
    .filter((c) => c.family === family)
    .map((c): AddressInterval => ({ family, first: max(networkOf(c), first), last: min(lastOf(c), last) }))
    .filter((c) => c.first <= c.last)
    .sort(byStart)
  const out: Array<AddressInterval> = []
  let cursor = first
  for (const cut of cuts) {
    if (cut.first > cursor) out.push({ family, first: cursor, last: cut.first - 1n })
    // Overlapping or nested excludes only ever move the cursor forward: each address is cut once.
    if (cut.last + 1n > cursor) cursor = cut.last + 1n
  }
  if (cursor <= last) out.push({ family, first: cursor, last })
  return out
}

/** The addresses `range` can hand out, as sorted disjoint intervals. */
export const allocatableIntervals = (range: IpRange): ReadonlyArray<AddressInterval> => {
  const window = allocationWindow(range)
  return window === undefined ? [] : subtractExcludes(range.cidr.family, window.first, window.last, range.exclude)
}

/** Sorted, disjoint, non-adjacent intervals covering exactly the addresses of `intervals`. */
const unionIntervals = (intervals: ReadonlyArray<AddressInterval>): ReadonlyArray<AddressInterval> => {
  const out: Array<AddressInterval> = []
  for (const next of [...intervals].sort(byStart)) {
    const prev = out[out.length - 1]
    if (prev !== undefined && prev.family === next.family && next.first <= prev.last + 1n) {
      if (next.last > prev.last) out[out.length - 1] = { ...prev, last: next.last }
    } else out.push(next)
  }
  return out
}

/** Number of addresses in disjoint intervals. */
export const intervalsSize = (intervals: ReadonlyArray<AddressInterval>): bigint =>
  intervals.reduce((sum, i) => sum + (i.last - i.first + 1n), 0n)

/** Addresses of one IPPool that any of the ranges writing to it (one per NAD) may hand out. */
export const poolIntervals = (ranges: ReadonlyArray<IpRange>): ReadonlyArray<AddressInterval> =>
  unionIntervals(ranges.flatMap(allocatableIntervals))

/**
 * The range the plugin allocates from on a node that owns `slice` (upstream 0.9.2 IPManagementKubernetesUpdate):
 * the NAD's CIDR bounded by the slice's usable addresses, the NAD's range_start, range_end and
 * exclude dropped. Undefined when the slice has no usable address (the plugin's ADD fails).
 */
export const sliceRange = (range: IpRange, slice: Cidr): IpRange | undefined => {
  const usable = usableRange(slice)
  if (usable === undefined) return undefined
  const at = (value: bigint) => ({ family: slice.family, value })
  return { range: range.range, cidr: range.cidr, rangeStart: at(usable.first), rangeEnd: at(usable.last), exclude: [] }
}

/** How many of `ips` lie in sorted disjoint `intervals`; an address given twice counts twice (a pool's offsets are distinct). */
export const countWithin = (intervals: ReadonlyArray<AddressInterval>, ips: Iterable<IPAddress>): number => {
  let count = 0
  for (const ip of ips) {
    let [lo, hi] = [0, intervals.length - 1]
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const i = intervals[mid]!
      if (ip.family < i.family || (ip.family === i.family && ip.value < i.first)) hi = mid - 1
      else if (ip.family > i.family || ip.value > i.last) lo = mid + 1
      else {
        count++
        break
      }
    }
  }
  return count
}

/** Whether a pool's usage is at or over the threshold (preflight warns, the controller records an Event, the gauge reads 1). */
export const atOrOver = (p: { readonly size: number; readonly free: number }, threshold: number) => p.size > 0 && (p.size - p.free) / p.size >= threshold
