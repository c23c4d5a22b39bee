/**
 * The whereabouts allocation rules (what the CNI plugin does), used to play the plugin in
 * tests, the demo and benchmarks, and to know which addresses a range can hand out.
 */
import { Data, Either } from "effect"
import { type Cidr, type IPAddress, cidrAddress, formatIP, lastOf, networkOf, usableRange } from "../domain/ip.ts"
import type { IpRange } from "../domain/ipam-config.ts"
import type { IPAllocation } from "../domain/pool.ts"

export class AssignmentError extends Data.TaggedError("AssignmentError")<{
  readonly range: string
  readonly message: string
}> {}

export interface AllocationRequest {
  readonly id: string
  readonly podref: string
  readonly ifname: string
}

export type Allocations = Readonly<Record<string, IPAllocation>>

/** The offset of `ip` from `base` (addOffset's inverse), or undefined when `ip` is below `base` or of another family. */
export const offsetOf = (base: IPAddress, ip: IPAddress): bigint | undefined =>
  ip.family === base.family && ip.value >= base.value ? ip.value - base.value : undefined

/** First and last address the range may hand out: usable range narrowed by in-range bounds. */
const allocatableBounds = (r: IpRange): { readonly first: bigint; readonly last: bigint } | undefined => {
  const usable = usableRange(r.cidr)
  if (usable === undefined) return undefined
  let { first, last } = usable
  const inside = (ip: IPAddress | undefined, lo: bigint, hi: bigint): ip is IPAddress =>
    ip !== undefined && ip.family === r.cidr.family && ip.value >= lo && ip.value <= hi
  // Bounds outside the usable range (and an end below the start) are ignored, as upstream does.
  if (inside(r.rangeStart, first, last)) first = r.rangeStart.value
  if (inside(r.rangeEnd, first, last)) last = r.rangeEnd.value
  return { first, last }
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER)
/** "0", or up to 15 digits without a leading zero (so below 2^53): a char loop, no regex per key. */
const isSmallDecimal = (key: string): boolean => {
  const len = key.length
  if (len === 0 || len > 15 || (len > 1 && key.charCodeAt(0) === 48)) return false
  for (let i = 0; i < len; i++) {
    const c = key.charCodeAt(i)
    if (c < 48 || c > 57) return false
  }
  return true
}

type Interval = readonly [bigint, bigint]

/** Generic sweep over sorted points and intervals; only for spans beyond 2^53. */
const sweepBig = (span: bigint, points: ReadonlyArray<bigint>, excl: ReadonlyArray<Interval>): bigint | undefined => {
  const sorted = [...points].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  let rel = 0n
  let i = 0
  let j = 0
  for (;;) {
    while (i < sorted.length && sorted[i]! < rel) i++
    while (j < excl.length && excl[j]![1] < rel) j++
    if (j < excl.length && excl[j]![0] <= rel) rel = excl[j]![1] + 1n
    else if (i < sorted.length && sorted[i] === rel) rel++
    else break
  }
  return rel <= span ? rel : undefined
}

/**
 * Lowest offset in [0, span] that is neither reserved nor excluded. Reserved offsets are plain
 * numbers; no BigInt work or formatting happens per candidate address.
 */
const lowestFreeOffset = (
  span: bigint,
  reserved: Float64Array,
  excluded: ReadonlyArray<Interval>,
  farReserved: ReadonlyArray<bigint> = []
): bigint | undefined => {
  const excl = [...excluded].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  // The sweep below never passes the last reserved point or exclusion end, so a wide span (an
  // IPv6 /64) alone does not need BigInt; only points or exclusions beyond 2^53 do.
  if (farReserved.length > 0 || excl.some(([, end]) => end >= SAFE)) {
    // Exclusions can push the sweep past 2^53, where the far reserved offsets matter too.
    return sweepBig(span, [...Array.from(reserved, (n) => BigInt(n)), ...farReserved], excl)
  }
  if (excl.length === 0) {
    // The lowest free offset is at most the number of reserved ones: mark those in a bitmap, no sort.
    const taken = new Uint8Array(reserved.length + 1)
    for (let k = 0; k < reserved.length; k++) {
      const p = reserved[k]!
      if (p < taken.length) taken[p] = 1
    }
    let free = 0
    while (taken[free] === 1) free++
    return BigInt(free) <= span ? BigInt(free) : undefined
  }
  const exStart = excl.map(([s]) => Number(s))
  const exEnd = excl.map(([, e]) => Number(e))
  const points = reserved.slice().sort()
  let rel = 0
  let i = 0
  let j = 0
  for (;;) {
    while (i < points.length && points[i]! < rel) i++
    while (j < exEnd.length && exEnd[j]! < rel) j++
    if (j < exStart.length && exStart[j]! <= rel) rel = exEnd[j]! + 1
    else if (i < points.length && points[i] === rel) rel++
    else break
  }
  return BigInt(rel) <= span ? BigInt(rel) : undefined
}

/**
 * Offsets relative to `first` of every reserved address, from pool keys (fast) and extra IPs:
 * plain numbers up to 2^53, BigInt beyond (only in ranges wider than that).
 */
const relativeReserved = (
  first: bigint,
  last: bigint,
  base: bigint,
  keys: ReadonlyArray<string>,
  extra: ReadonlyArray<IPAddress>
): { readonly near: Float64Array; readonly far: ReadonlyArray<bigint> } => {
  const out = new Float64Array(keys.length + extra.length)
  let n = 0
  const far: Array<bigint> = []
  const delta = first - base
  const fast = delta >= 0n && delta <= SAFE
  const deltaNum = Number(delta)
  // Compared as numbers: no BigInt per allocation (a span beyond 2^53 admits every safe offset).
  const spanNum = last - first <= SAFE ? Number(last - first) : Number.MAX_SAFE_INTEGER
  const push = (abs: bigint) => {
    if (abs < first || abs > last) return
    if (abs - first <= SAFE) out[n++] = Number(abs - first)
    else far.push(abs - first)
  }
  for (const key of keys) {
    if (fast && isSmallDecimal(key)) {
      const rel = Number(key) - deltaNum
      if (rel >= 0 && rel <= spanNum) out[n++] = rel
    } else if (/^(0|[1-9][0-9]*)$/.test(key)) push(base + BigInt(key))
  }
  for (const ip of extra) push(ip.value)
  return { near: out.subarray(0, n), far }
}

const excludedIntervals = (exclude: ReadonlyArray<Cidr>, family: 4 | 6, first: bigint, last: bigint): Array<Interval> =>
  exclude.flatMap((c) => {
    if (c.family !== family) return []
    const lo = networkOf(c) > first ? networkOf(c) : first
    const hi = lastOf(c) < last ? lastOf(c) : last
    return lo <= hi ? [[lo - first, hi - first] as const] : []
  })

/** What both searches of a free offset read: the window, the pool (its keys count from `base`), its entry count, what else is taken. */
interface PoolSearch {
  readonly first: bigint
  readonly last: bigint
  readonly base: bigint
  readonly allocations: Allocations
  readonly count: number
  readonly excluded: ReadonlyArray<Interval>
  readonly alsoReserved: ReadonlyArray<IPAddress>
}

/**
 * The lowest free offset (relative to `first`) by asking the pool for each candidate in turn:
 * `allocations[n]` with a number n looks the element up without making a key string, and the
 * walk stops at the first free address, so it makes at most one probe per allocation, reserved
 * address and exclusion, plus one. When a candidate's pool offset could pass 2^53 (a range
 * starting that far from the pool's address, or exclusions reaching that far), the bitmap and
 * BigInt search over every key answers instead. Used when the walk did not find the answer.
 */
const searchFree = ({ first, last, base, allocations, count, excluded, alsoReserved }: PoolSearch): bigint | undefined => {
  const delta = first - base
  const reach = excluded.reduce((m, [, end]) => (end > m ? end : m), 0n) + BigInt(count + alsoReserved.length + 1)
  if (delta < 0n || delta + reach > SAFE) {
    const reserved = relativeReserved(first, last, base, Object.keys(allocations), alsoReserved)
    return lowestFreeOffset(last - first, reserved.near, excluded, reserved.far)
  }
  const deltaNum = Number(delta)
  const spanNum = last - first < SAFE ? Number(last - first) : Number.MAX_SAFE_INTEGER
  const extra = new Set<number>()
  for (const ip of alsoReserved) {
    if (ip.value >= first && ip.value - first <= reach) extra.add(Number(ip.value - first))
  }
  const sorted = [...excluded].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  const exStart = sorted.map(([s]) => Number(s))
  const exEnd = sorted.map(([, e]) => Number(e))
  let rel = 0
  let j = 0
  for (;;) {
    while (j < exEnd.length && exEnd[j]! < rel) j++
    if (j < exStart.length && exStart[j]! <= rel) rel = exEnd[j]! + 1
    else if (allocations[deltaNum + rel] !== undefined) {
      // The common run: consecutive allocations, nothing else to check between them.
      do rel++
      while (allocations[deltaNum + rel] !== undefined)
    } else if (extra.has(rel)) rel++
    else break
  }
  return rel <= spanNum ? BigInt(rel) : undefined
}

export type AssignResult = {
  readonly ip: IPAddress
  readonly key: string
  /** The entry the pool must hold at `key` (the old one, or a copy with the new id). */
  readonly entry: IPAllocation
  readonly existing: boolean
}

/**
 * One pass that usually does both jobs of an assignment: it asks the pool for offset 0, 1, 2, …
 * from the range's first address (a numeric element lookup, no key string), checks every entry
 * it meets against the request, and notes the first offset that is neither taken, excluded nor
 * reserved elsewhere. It stops once it has met all `count` entries and found a free offset, or
 * when the offsets it passed without an entry outnumber half the entries it met, plus 16 (a
 * sparse pool: scanning the values is cheaper than walking on, and a lookup of a missing
 * element is the slow kind). A pool filled lowest first (nothing below the range, up to a third
 * of the addresses up to its last entry free again) is settled in one walk: `metAll` says no
 * entry matches the request, `free` is the lowest free offset. Otherwise the caller scans the
 * values (`metAll` false: an entry below the range or not a number, left unmet, or one that
 * matches) and searches again (`free` undefined). Undefined when a lookup could pass 2^53.
 */
const walkPool = (
  { first, last, base, allocations, count, excluded, alsoReserved }: PoolSearch,
  request: AllocationRequest
): { readonly metAll: boolean; readonly free: bigint | undefined } | undefined => {
  const delta = first - base
  // The walk never passes count entries plus half as many holes (and a few).
  if (delta < 0n || delta + BigInt(count + Math.floor(count / 2) + 17) > SAFE) return undefined
  const deltaNum = Number(delta)
  const spanNum = last - first < SAFE ? Number(last - first) : Number.MAX_SAFE_INTEGER
  const { podref, ifname } = request
  let met = 0
  let matched = false
  let free = -1
  let rel = 0
  while (rel - met <= (met >> 1) + 16) {
    // A run of taken offsets: the common case, kept to a lookup and a comparison per entry.
    let at = deltaNum + rel
    let a = allocations[at]
    while (a !== undefined) {
      if (a.podref === podref && (a.ifname ?? "") === ifname) matched = true
      a = allocations[++at]
    }
    met += at - deltaNum - rel
    rel = at - deltaNum
    if (free < 0 && rel <= spanNum && !blockedAt(rel, first, excluded, alsoReserved)) free = rel
    if (free >= 0 && met >= count) break
    rel++
  }
  return { metAll: met === count && !matched, free: free < 0 ? undefined : BigInt(free) }
}

/** Whether an offset the pool leaves free is excluded or reserved elsewhere (both lists are short). */
const blockedAt = (rel: number, first: bigint, excluded: ReadonlyArray<Interval>, alsoReserved: ReadonlyArray<IPAddress>): boolean => {
  if (excluded.length === 0 && alsoReserved.length === 0) return false
  const r = BigInt(rel)
  return excluded.some(([lo, hi]) => lo <= r && r <= hi) || alsoReserved.some((ip) => ip.value === first + r)
}

/** The idempotency check over every entry: the first of this podref and ifname under a numeric key. */
const findExisting = (
  range: IpRange,
  base: bigint,
  allocations: Allocations,
  values: ReadonlyArray<IPAllocation>,
  request: AllocationRequest
): AssignResult | undefined => {
  let keys: ReadonlyArray<string> | undefined
  const { podref, ifname } = request
  for (let i = 0, n = values.length; i < n; i++) {
    const a = values[i]!
    if (a.podref !== podref || (a.ifname ?? "") !== ifname) continue
    // Same order as Object.values (integer-like keys ascending, then the rest as inserted).
    keys ??= Object.keys(allocations)
    const key = keys[i]!
    if (/^(0|[1-9][0-9]*)$/.test(key)) {
      const entry = a.id === request.id ? a : { ...a, id: request.id }
      return { ip: { family: range.cidr.family, value: base + BigInt(key) }, key, entry, existing: true }
    }
  }
  return undefined
}

const exhausted = (range: IpRange, why: string) =>
  Either.left(new AssignmentError({ range: range.range, message: `could not allocate IP in range ${range.range}: ${why}` }))

/**
 * Assigns an address from `range` into a pool whose `spec.range` is `poolCidr`:
 * the same podref+ifname gets its address back (id updated), else the lowest free one.
 * `alsoReserved` holds addresses taken elsewhere (overlapping-range reservations).
 * The pool is not copied: `withAssignment` builds the new allocation map for callers that
 * write the whole pool. The rarer paths live in their own functions, so a first call compiles
 * only what it runs.
 */
export const assignIP = (
  range: IpRange,
  poolCidr: Cidr,
  allocations: Allocations,
  request: AllocationRequest,
  alsoReserved: ReadonlyArray<IPAddress> = []
): Either.Either<AssignResult, AssignmentError> => {
  const base = cidrAddress(poolCidr).value
  // The values alone: pools decoded from JSON hold integer-like keys, which V8 keeps as elements,
  // so Object.keys would make a string of every one (the keys are read only on a match).
  const values = Object.values(allocations)
  const bounds = allocatableBounds(range)
  const search: PoolSearch | undefined = bounds === undefined ? undefined : {
    ...bounds,
    base,
    allocations,
    count: values.length,
    excluded: excludedIntervals(range.exclude, range.cidr.family, bounds.first, bounds.last),
    alsoReserved
  }
  const walked = search === undefined ? undefined : walkPool(search, request)
  if (walked === undefined || !walked.metAll) {
    const existing = findExisting(range, base, allocations, values, request)
    if (existing !== undefined) return Either.right(existing)
  }
  if (search === undefined) return exhausted(range, "the range has no usable addresses")
  const { first, last } = search
  const rel = walked?.free ?? searchFree(search)
  if (rel === undefined) {
    const at = (value: bigint) => formatIP({ family: range.cidr.family, value })
    return exhausted(range, `every address from ${at(first)} to ${at(last)} is reserved or excluded`)
  }
  const ip = { family: range.cidr.family, value: first + rel }
  const key = (ip.value - base).toString()
  return Either.right({ ip, key, entry: { id: request.id, podref: request.podref, ifname: request.ifname }, existing: false })
}

/** The allocation map with an assignment applied; the same map when nothing changed. */
export const withAssignment = (allocations: Allocations, assigned: AssignResult): Allocations =>
  allocations[assigned.key] === assigned.entry ? allocations : { ...allocations, [assigned.key]: assigned.entry }

/** CNI DEL: frees the entry with this container id and ifname; no match is not an error. */
export const releaseById = (
  allocations: Allocations,
  id: string,
  ifname: string
): { readonly allocations: Allocations; readonly freed: string | undefined } => {
  for (const key in allocations) {
    const a = allocations[key]!
    if (a.id === id && (a.ifname ?? "") === ifname) {
      const { [key]: _gone, ...rest } = allocations
      return { allocations: rest, freed: key }
    }
  }
  return { allocations, freed: undefined }
}

/** Frees every entry of `podref` in a pool whose `spec.range` is `poolCidr`, or only those at `onlyIPs`. */
export const releaseByPodref = (
  poolCidr: Cidr,
  allocations: Allocations,
  podref: string,
  onlyIPs?: ReadonlyArray<IPAddress>
): { readonly allocations: Allocations; readonly freed: ReadonlyArray<string> } => {
  const base = cidrAddress(poolCidr)
  const onlyKeys =
    onlyIPs === undefined ? undefined : new Set(onlyIPs.flatMap((ip) => offsetOf(base, ip)?.toString() ?? []))
  const kept: Record<string, IPAllocation> = {}
  const freed: Array<string> = []
  for (const key in allocations) {
    const a = allocations[key]!
    if (a.podref === podref && (onlyKeys === undefined || onlyKeys.has(key))) freed.push(key)
    else kept[key] = a
  }
  return { allocations: freed.length === 0 ? allocations : kept, freed }
}
