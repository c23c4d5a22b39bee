/**
 * The invariants an IPAM must keep, judged over one view of the cluster (the controller's caches,
 * or audit's fresh listing): what a garbage collector that frees addresses must prove it never broke.
 *  - live-not-held: a running pod lists an address of a whereabouts network that no pool entry of
 *    that network holds for it (the next ADD can hand the address to another pod);
 *  - held-for-another: the pool entry of that address names another podref;
 *  - duplicate: one address listed by two running pods in one collision domain (rule 0's, claims.ts),
 *    or held in two pools of one domain for two running pods;
 *  - reservation-drift: a running pod's entry without its OverlappingRangeIPReservation where its
 *    network keeps them, or with one naming another podref.
 *
 * An entry counts wherever its network keeps it: one written before the NAD's ranges were edited
 * stays in a pool the config no longer names, and still holds the address for the pod.
 *
 * Only settled facts count (`judged`, `onJudgedNetwork`). A listing rule 0 cannot place (a NAD gone
 * or unreadable, the default network) is not reported: no pool is known to owe it. A pod's status
 * carries no container id, so an entry left by an earlier incarnation of the same name counts as the
 * pod's own. How long a disagreement must last before it is reported is the caller's.
 */
import { byStart } from "./capacity.ts"
import { type ClaimSource, type ListedIn, listedDomains, listedIn } from "./claims.ts"
import {
  REASON_ADDRESS_NOT_HELD, REASON_DUPLICATE_ADDRESS, REASON_HELD_FOR_ANOTHER, REASON_RESERVATION_DRIFT,
  heldForAnotherMessage, heldTwiceMessage, listedTwiceMessage, notHeldMessage, reservationDriftMessage
} from "./events.ts"
import { type IPAddress, formatIP, ipEquals, ipKey, lastOf, networkOf } from "./ip.ts"
import { listedIP, statusAttachment } from "./multus.ts"
import type { Snapshot } from "./holdings.ts"
import { type PodIdentity, type PodProjection, podIdentity, podRef, statusEntries } from "./pod.ts"
import type { ParsedPool, PoolEntry } from "./pool.ts"

export const INVARIANT_KINDS = ["live-not-held", "held-for-another", "duplicate", "reservation-drift"] as const
export type InvariantKind = (typeof INVARIANT_KINDS)[number]

/** The Event reason of each kind (events.ts). */
export const VIOLATION_REASON: Readonly<Record<InvariantKind, string>> = {
  "live-not-held": REASON_ADDRESS_NOT_HELD,
  "held-for-another": REASON_HELD_FOR_ANOTHER,
  duplicate: REASON_DUPLICATE_ADDRESS,
  "reservation-drift": REASON_RESERVATION_DRIFT
}

export type { PodIdentity }

export interface InvariantViolation {
  readonly kind: InvariantKind
  /** The same disagreement has the same id from one evaluation to the next; a pod reborn under its name makes a new one. */
  readonly id: string
  readonly ip: IPAddress
  /** The running pods it involves: those whose state makes it a violation, and who get its Event. */
  readonly pods: ReadonlyArray<PodIdentity>
  /** The pool (or pools) whose entries it is about. */
  readonly pools: ReadonlyArray<string>
  readonly reservation: string | undefined
  /** Whom the entry or reservation names instead, where it names another podref. */
  readonly holder: string | undefined
  /** One line naming every object involved: the Event's message, audit's row, the log line. */
  readonly message: string
}

/** An entry of a pool at an address. */
export type EntryLookup = (pool: ParsedPool, ip: IPAddress) => PoolEntry | undefined

/** Pools this small are scanned. */
const SCAN_AT_MOST = 8

/** Whether entries come in strictly ascending address order. */
const inAddressOrder = (entries: ReadonlyArray<PoolEntry>): boolean => {
  for (let i = 1; i < entries.length; i++) if (entries[i - 1]!.ip.value >= entries[i]!.ip.value) return false
  return true
}

/**
 * The entry at an address, by binary search: entries come in offset order, as JavaScript keeps an
 * object's integer keys ascending and pool.ts refuses offsets with a leading zero. A pool out of
 * order (offsets past 2^32 - 2, only IPv6 ranges reach them) gets an index of its own. Whether a
 * pool version is in order is found once per object; keep one lookup per caller.
 */
export const makeEntryLookup = (): EntryLookup => {
  const unordered = new WeakMap<ParsedPool, ReadonlyMap<string, PoolEntry> | false>()
  return (pool, ip) => {
    const entries = pool.entries
    if (entries.length <= SCAN_AT_MOST) return entries.find((e) => ipEquals(e.ip, ip))
    if (pool.cidr === undefined || pool.cidr.family !== ip.family) return undefined
    let index = unordered.get(pool)
    if (index === undefined) unordered.set(pool, (index = inAddressOrder(entries) ? false : new Map(entries.map((e) => [ipKey(e.ip), e] as const))))
    if (index !== false) return index.get(ipKey(ip))
    let [low, high] = [0, entries.length - 1]
    while (low <= high) {
      const mid = (low + high) >>> 1
      const at = entries[mid]!.ip.value
      if (at === ip.value) return entries[mid]
      if (at < ip.value) low = mid + 1
      else high = mid - 1
    }
    return undefined
  }
}

/** What the invariants are judged on: one consistent view, and rule 0's way of placing a listing. */
export interface InvariantView extends Pick<ClaimSource, "listedBy">, Pick<Snapshot, "pool" | "poolsHeldBy" | "origin" | "reservation" | "nad" | "nodeSlice" | "reservationNetwork"> {
  readonly pods: Iterable<PodProjection>
  readonly pod: (ref: string) => PodProjection | undefined
  readonly pools: Iterable<ParsedPool>
  readonly entryAt: EntryLookup
}

/** A pod whose listing is a settled fact: its ADD is done and no deletion has begun. */
export const judged = (pod: PodProjection): boolean => pod.phase === "Running" && pod.deletionTimestamp === undefined

/** An address a judged pod lists on a whereabouts network it can place. */
interface Listing {
  readonly pod: PodProjection
  readonly ref: string
  readonly network: string
  readonly ip: IPAddress
  readonly where: Extract<ListedIn, { _tag: "Network" }>
}

/** The addresses a pod lists that belong to a whereabouts network it can place. */
const listingsOf = (pod: PodProjection, view: InvariantView): ReadonlyArray<Listing> => {
  const ref = podRef(pod)
  const out: Array<Listing> = []
  for (const e of statusEntries(pod)) {
    // The cluster network's entry: rule 0 keeps it everywhere, but no pool is known to owe it.
    if (e.default === true && !e.name.includes("/")) continue
    const nad = statusAttachment(e, pod.namespace)
    for (const text of e.ips ?? []) {
      const ip = listedIP(text)
      const where = ip === undefined ? undefined : listedIn(pod, nad, ip, view)
      if (ip !== undefined && where?._tag === "Network") out.push({ pod, ref, network: `${nad.namespace}/${nad.name}`, ip, where })
    }
  }
  return out
}

/** A violation of one listing's pod (addresses are formatted only for what is reported). */
const ofListing = (l: Listing, kind: InvariantKind, pools: ReadonlyArray<string>, holder: string | undefined, message: (ip: string) => string): InvariantViolation => ({
  kind,
  id: `${kind}|${l.ref}|${l.pod.uid}|${ipKey(l.ip)}|${pools.join(",")}|${holder ?? ""}`,
  ip: l.ip,
  pods: [podIdentity(l.pod)],
  pools,
  reservation: l.where.reservation,
  holder,
  message: message(formatIP(l.ip))
})

/** live-not-held, held-for-another or reservation-drift of one listing, if any. */
const holdingOf = (l: Listing, view: InvariantView): InvariantViolation | undefined => {
  let other: { readonly pool: string; readonly entry: PoolEntry } | undefined
  let own: string | undefined
  for (const name of l.where.pools) {
    const pool = view.pool(name)
    const entry = pool === undefined ? undefined : view.entryAt(pool, l.ip)
    if (entry?.podref === l.ref) {
      own = name
      break
    }
    if (entry !== undefined) other ??= { pool: name, entry }
  }
  // Written under an earlier config of the network: the pool is no longer named, the entry still holds.
  own ??= view.poolsHeldBy(l.ref).find((p) => view.origin(p).network === l.where.networkName && view.entryAt(p, l.ip)?.podref === l.ref)?.name
  if (own === undefined && other === undefined) {
    return ofListing(l, "live-not-held", l.where.pools, undefined, (ip) => notHeldMessage(ip, l.ref, l.network, l.where.pools[0]!))
  }
  if (own === undefined) {
    const { pool, entry } = other!
    return ofListing(l, "held-for-another", [pool], entry.podref, (ip) => heldForAnotherMessage(ip, l.ref, l.network, pool, entry.podref))
  }
  const name = l.where.reservation
  if (name === undefined) return undefined
  const owner = view.reservation(name)?.podref
  if (owner === l.ref) return undefined
  return ofListing(l, "reservation-drift", [own], owner, (ip) => reservationDriftMessage(ip, l.ref, own, name, owner))
}

/** A duplicate of `ip` among `pods` (in podref order); one id per address and set of pods, listed or held: one report for both. */
const duplicate = (ip: IPAddress, pods: ReadonlyArray<PodProjection>, pools: ReadonlyArray<string>, reservation: string | undefined, message: string): InvariantViolation => ({
  kind: "duplicate",
  id: `duplicate|${ipKey(ip)}|${[...new Set(pods.map((p) => `${podRef(p)}@${p.uid}`))].sort().join(",")}`,
  ip,
  pods: pods.map(podIdentity),
  pools: [...new Set(pools)],
  reservation,
  holder: undefined,
  message
})

/** Duplicates of one listing: each other judged pod listing the address in one of its domains (found from both sides; the id makes it one). */
const listedTwice = (l: Listing, view: InvariantView): ReadonlyArray<InvariantViolation> => {
  const listers = view.listedBy(l.ip)
  if (listers.length < 2) return []
  const domains = new Set(listedDomains(l.where, l.ip))
  const out: Array<InvariantViolation> = []
  for (const pod of listers) {
    if (!judged(pod) || podRef(pod) === l.ref) continue
    const other = listingsOf(pod, view).find((o) => ipEquals(o.ip, l.ip) && onJudgedNetwork(o, view) && listedDomains(o.where, o.ip).some((d) => domains.has(d)))
    if (other === undefined) continue
    // In podref order, so the report is the same whichever pod the cache yields first.
    const [x, y] = l.ref < other.ref ? [l, other] : [other, l]
    const message = listedTwiceMessage(formatIP(l.ip), { pod: x.ref, network: x.network }, { pod: y.ref, network: y.network })
    out.push(duplicate(l.ip, [x.pod, y.pod], [...x.where.pools, ...y.where.pools], x.where.reservation ?? y.where.reservation, message))
  }
  return out
}

/** A network none of whose pools this namespace holds is not judged: its pools may be another namespace's. */
const onJudgedNetwork = (l: Listing, view: InvariantView): boolean => l.where.pools.some((name) => view.pool(name) !== undefined)

/** Groups of two or more pools whose ranges overlap (one family, sorted by first address). */
const overlappingGroups = (pools: ReadonlyArray<ParsedPool>): ReadonlyArray<ReadonlyArray<ParsedPool>> => {
  const ranged = pools.flatMap((p) => (p.cidr === undefined ? [] : [{ p, family: p.cidr.family, first: networkOf(p.cidr), last: lastOf(p.cidr) }]))
  ranged.sort(byStart)
  const groups: Array<Array<ParsedPool>> = []
  let group: Array<ParsedPool> = []
  let end = -1n
  let family = 0
  for (const r of ranged) {
    if (r.family === family && r.first <= end) {
      group.push(r.p)
      if (r.last > end) end = r.last
      continue
    }
    if (group.length > 1) groups.push(group)
    ;[group, end, family] = [[r.p], r.last, r.family]
  }
  if (group.length > 1) groups.push(group)
  return groups
}

/** Entries of overlapping pools of one reservation-keeping network that hold one address for two judged pods. */
const heldTwice = (pools: ReadonlyArray<ParsedPool>, view: InvariantView): ReadonlyArray<InvariantViolation> => {
  const out: Array<InvariantViolation> = []
  for (const group of overlappingGroups(pools)) {
    const held = group.flatMap((pool) =>
      pool.entries.flatMap((entry) => {
        const pod = view.pod(entry.podref)
        return pod === undefined || !judged(pod) ? [] : [{ pool: pool.name, entry, pod }]
      })
    )
    for (const holders of Map.groupBy(held, (h) => ipKey(h.entry.ip)).values()) {
      if (new Set(holders.map((h) => h.entry.podref)).size < 2) continue
      holders.sort((a, b) => a.pool.localeCompare(b.pool) || a.entry.podref.localeCompare(b.entry.podref))
      const ip = holders[0]!.entry.ip
      const pods = [...new Map(holders.map((h) => [h.entry.podref, h.pod])).entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, p]) => p)
      const message = heldTwiceMessage(formatIP(ip), holders.map((h) => ({ pod: h.entry.podref, pool: h.pool })))
      out.push(duplicate(ip, pods, holders.map((h) => h.pool), undefined, message))
    }
  }
  return out
}

/** The pools with entries that keep reservations, by the network name those are named with. */
const reservingPools = (view: InvariantView): ReadonlyMap<string, ReadonlyArray<ParsedPool>> =>
  Map.groupBy([...view.pools].filter((p) => p.entries.length > 0 && view.reservationNetwork(p, "none") !== undefined), (p) => view.reservationNetwork(p, "none")!)

/**
 * Every violation the view shows, once each; linear in pods and pool entries. Pauses (yields) after
 * every `podsPerPause` pods, so that a caller can let other work run in between (`invariantViolations`
 * runs it through without pausing).
 */
export function* violationsPausing(view: InvariantView, podsPerPause: number): Generator<void, ReadonlyArray<InvariantViolation>> {
  const found = new Map<string, InvariantViolation>()
  const add = (v: InvariantViolation | undefined) => {
    if (v !== undefined && !found.has(v.id)) found.set(v.id, v)
  }
  let pods = 0
  for (const pod of view.pods) {
    if (++pods % podsPerPause === 0) yield
    if (!judged(pod)) continue
    for (const l of listingsOf(pod, view)) {
      if (!onJudgedNetwork(l, view)) continue
      listedTwice(l, view).forEach(add)
      add(holdingOf(l, view))
    }
  }
  for (const pools of reservingPools(view).values()) if (pools.length > 1) heldTwice(pools, view).forEach(add)
  return [...found.values()]
}

/** Every violation the view shows, once each, in one go. */
export const invariantViolations = (view: InvariantView): ReadonlyArray<InvariantViolation> => {
  const steps = violationsPausing(view, Infinity)
  let step = steps.next()
  while (step.done !== true) step = steps.next()
  return step.value
}

/** How many violations of each kind, every kind named. */
export const countByKind = (violations: Iterable<InvariantViolation>): Readonly<Record<InvariantKind, number>> => {
  const counts = Object.fromEntries(INVARIANT_KINDS.map((k) => [k, 0])) as Record<InvariantKind, number>
  for (const v of violations) counts[v.kind]++
  return counts
}
