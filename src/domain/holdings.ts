/**
 * What a candidate holds, from a snapshot of pools, reservations and NAD configs (the caches or a
 * fresh listing): a deleted pod's through its annotations, its NADs and the podref index; the
 * sweep's orphans grouped by podref.
 */
import { Either } from "effect"
import { type EventIntent, REASON_NAD_MISSING, nadMissingMessage, podObject } from "./events.ts"
import { countWithin, intervalsSize, poolIntervals, sliceRange } from "./capacity.ts"
import { type IPAddress, parseCidr, usableRange } from "./ip.ts"
import { type DecodedNad, type IpRange, notOurs } from "./ipam-config.ts"
import { listsIP, statusAttachment } from "./multus.ts"
import { type NodeSlicePoolRecord, type PoolOrigin, nodeSlicePoolName, poolOrigins, sliceNetworks, sliceOfNode } from "./node-slices.ts"
import { type ClaimLookup, networkPools } from "./claims.ts"
import type { Orphans } from "./orphans.ts"
import { type NamespacedName, type PodProjection, podAttachments, podIdentity, podRef, splitPodRef, statusEntries } from "./pod.ts"
import { type ParsedPool, type PoolEntry, type ReservationRecord, poolName, reservationName } from "./pool.ts"
import type { HeldEntry, HeldReservation, Holding, Problem } from "./release.ts"

/** What the planner may look up; every function answers from one consistent view. */
export interface Snapshot extends ClaimLookup {
  readonly pool: (name: string) => ParsedPool | undefined
  /** Pools with an entry of this podref (the podref index). */
  readonly poolsHeldBy: (podref: string) => ReadonlyArray<ParsedPool>
  readonly reservation: (name: string) => ReservationRecord | undefined
  readonly reservationsHeldBy: (podref: string) => ReadonlyArray<ReservationRecord>
  /** What an Event names for an address of a pool: a NAD that writes it (pickNad), else its network, else the pool. */
  readonly eventNetwork: (pool: ParsedPool, podNamespace: string) => string
  readonly origin: (pool: ParsedPool) => PoolOrigin
  readonly capacity: (pool: ParsedPool) => PoolCapacity
  /**
   * The network name a pool's reservations are named with: its network where a NAD writing it keeps them
   * (overlapping ranges on), none where every one turns them off. Where no NAD known writes the pool, `unknown`
   * decides: "named" to free (one that does not exist costs a request, one left behind keeps its address),
   * "none" to judge invariants (what may not exist is not missing).
   */
  readonly reservationNetwork: (pool: ParsedPool, unknown: "named" | "none") => string | undefined
}

/** A NAD and the range of its config that writes a pool; `keeps`: that config keeps reservations. */
type Writer = NamespacedName & { readonly range: IpRange; readonly keeps: boolean }

/** The NADs that write each pool: whole-range pools by pool name, node-slice networks by NodeSlicePool name. */
interface NadIndex {
  readonly rangePools: ReadonlyMap<string, ReadonlyArray<Writer>>
  readonly slicePools: ReadonlyMap<string, ReadonlyArray<Writer>>
}

/** Indexes every NAD's decoded whereabouts config by the pools it writes. */
export const nadIndex = (nads: Iterable<DecodedNad>): NadIndex => {
  const writes = [...nads].flatMap((nad) => {
    if (Either.isLeft(nad.config) || nad.config.right._tag !== "Whereabouts") return []
    const config = nad.config.right.config
    const writer = (range: IpRange) => ({ namespace: nad.namespace, name: nad.name, range, keeps: config.enableOverlappingRanges })
    // Node slices are cut from the first range only (upstream's node-slice controller).
    if (config.nodeSliceSize !== undefined) return config.ranges.slice(0, 1).map((range) => ({ slice: true, pool: nodeSlicePoolName(config), writer: writer(range) }))
    return config.ranges.map((range) => ({ slice: false, pool: poolName(range.range, config.networkName), writer: writer(range) }))
  })
  const byPool = (slice: boolean): ReadonlyMap<string, ReadonlyArray<Writer>> =>
    new Map([...Map.groupBy(writes.filter((w) => w.slice === slice), (w) => w.pool)].map(([pool, ws]) => [pool, ws.map((w) => w.writer)]))
  return { rangePools: byPool(false), slicePools: byPool(true) }
}

/** How many addresses a pool can hand out, how many of its entries lie within, and whether NAD configs or only its range said so. */
export interface PoolCapacity {
  /** A gauge value: exact up to 2^53, the nearest double beyond (a /64 reads 1.8446744073709552e19). */
  readonly size: number
  readonly usedWithin: number
  readonly from: "config" | "range"
}

/** What the NADs writing a pool allow (a node-slice pool: sliceRange of each), else its range's usable addresses. */
const capacityOf = (pool: ParsedPool, origin: PoolOrigin, writers: ReadonlyArray<Writer>): PoolCapacity => {
  const slice = origin._tag === "Slice" ? parseCidr(origin.slice) : undefined
  const ranges = writers.flatMap((w) => (origin._tag !== "Slice" ? [w.range] : slice === undefined ? [] : [sliceRange(w.range, slice) ?? []].flat()))
  if (ranges.length === 0 || pool.cidr === undefined) {
    const usable = pool.cidr === undefined ? undefined : usableRange(pool.cidr)
    const size = usable === undefined ? 0 : Number(usable.last - usable.first + 1n)
    return { size, usedWithin: pool.entries.length, from: "range" }
  }
  const intervals = poolIntervals(ranges)
  return { size: Number(intervalsSize(intervals)), usedWithin: countWithin(intervals, pool.entries.map((e) => e.ip)), from: "config" }
}

/** The naming half of a Snapshot, from every NAD's decoded config and every NodeSlicePool. */
export const poolNaming = (
  nads: ReadonlyArray<DecodedNad>,
  nodeSlicePools: ReadonlyArray<NodeSlicePoolRecord>
): Pick<Snapshot, "eventNetwork" | "origin" | "nodeSlice" | "capacity" | "reservationNetwork"> => {
  const index = nadIndex(nads)
  const configs = nads.flatMap((n) => (Either.isRight(n.config) && n.config.right._tag === "Whereabouts" ? [n.config.right.config] : []))
  const origin = poolOrigins(sliceNetworks(configs, nodeSlicePools), (name) => index.rangePools.has(name))
  const byName = new Map(nodeSlicePools.map((p) => [p.name, p] as const))
  const writers = (pool: ParsedPool, o: PoolOrigin): ReadonlyArray<Writer> =>
    (o._tag === "Slice" ? index.slicePools.get(o.nodeSlicePool) : index.rangePools.get(pool.name)) ?? []
  return {
    origin,
    eventNetwork: (pool, podNamespace) => {
      const o = origin(pool)
      return pickNad(writers(pool, o), podNamespace) ?? (o._tag === "Slice" ? o.nodeSlicePool : o.network || pool.name)
    },
    nodeSlice: (nodeSlicePool, node) => sliceOfNode(byName.get(nodeSlicePool), node),
    capacity: (pool) => {
      const o = origin(pool)
      return capacityOf(pool, o, writers(pool, o))
    },
    reservationNetwork: (pool, unknown) => {
      const o = origin(pool)
      const known = writers(pool, o)
      return known.some((w) => w.keeps) || (known.length === 0 && unknown === "named") ? o.network : undefined
    }
  }
}

/** The NAD an index names for a pool: one in the pod's namespace first, else the first by namespace/name. */
export const pickNad = (candidates: ReadonlyArray<NamespacedName> = [], podNamespace: string): string | undefined =>
  (candidates.find((c) => c.namespace === podNamespace) ?? [...candidates].sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`))[0])?.name

/** A pool a pod's NAD names (by name while it is still to be read live), and the NAD's name for Events. */
type Found<P> = { readonly pool: P; readonly network: string }

/** What a deleted pod holds according to the snapshot, before live reads and reservations. */
export interface PodFindings {
  readonly ref: string
  readonly pod: PodProjection
  readonly pools: ReadonlyMap<string, Found<ParsedPool>>
  readonly liveReads: ReadonlyMap<string, Found<string>>
  readonly missingNads: ReadonlyArray<string>
  /**
   * NADs (`<namespace>/<name>`) missing, or in whose cached pools the snapshot shows none of the pod's
   * entries (freed by CNI DEL, or the cache lagged): worth one later look unless a live read finds them.
   */
  readonly unseen: ReadonlyArray<string>
  /** Per whereabouts attachment, the pools its NAD names. */
  readonly attached: ReadonlyArray<{ readonly nad: string; readonly pools: ReadonlyArray<string> }>
  readonly problems: ReadonlyArray<Problem>
}

/**
 * Finds, from the snapshot only, what a pod holds. An unreadable annotation or NAD config skips
 * only what it describes (and is reported): the podref index still finds the pod's entries.
 */
export const findPodHoldings = (pod: PodProjection, snapshot: Snapshot): PodFindings => {
  const ref = podRef(pod)
  const pools = new Map<string, Found<ParsedPool>>()
  const liveReads = new Map<string, Found<string>>()
  const missingNads: Array<string> = []
  const problems: Array<Problem> = []
  const attached: Array<PodFindings["attached"][number]> = []
  const decoded = podAttachments(pod)
  if (Either.isLeft(decoded)) problems.push({ reason: "BadAnnotation", text: `cannot read ${decoded.left.annotation}: ${decoded.left.message}` })
  const add = (pool: ParsedPool, network: string) => {
    if (!pools.has(pool.name) && pool.entries.some((e) => e.podref === ref)) pools.set(pool.name, { pool, network })
  }
  for (const att of Either.isRight(decoded) ? decoded.right : []) {
    const nadKey = `${att.namespace}/${att.name}`
    const nad = snapshot.nad(att.namespace, att.name)
    if (nad === undefined) missingNads.push(nadKey)
    else if (Either.isLeft(nad) && !notOurs(nad.left)) problems.push({ reason: "BadNadConfig", text: `cannot read network-attachment-definition ${nadKey}: ${nad.left.message}` })
    if (nad === undefined || Either.isLeft(nad) || nad.right._tag === "NotWhereabouts") continue
    // None for a node that owns no slice: the podref index still finds the pod's entries.
    const names = networkPools(nad.right.config, pod.nodeName ?? "", snapshot)
    attached.push({ nad: nadKey, pools: names })
    for (const name of names) {
      const cached = snapshot.pool(name)
      // A cached pool without this pod's entries was almost always freed by CNI DEL already, and a
      // GET of a large pool per deletion is costly: only a pool the snapshot has never seen is read live.
      if (cached === undefined) liveReads.set(name, { pool: name, network: att.name })
      else add(cached, att.name)
    }
  }
  // Whatever else carries this podref: NAD deleted first, status missing, range changed since.
  for (const pool of snapshot.poolsHeldBy(ref)) {
    add(pool, snapshot.eventNetwork(pool, pod.namespace))
    liveReads.delete(pool.name)
  }
  // A pool read live counts only once the read shows the pod's entries (unseenAfterReads): the NAD
  // may have been edited to a new range after the pod's ADD.
  const unseen = attached.filter((a) => !a.pools.some((name) => pools.has(name))).map((a) => a.nad)
  for (const nad of missingNads) if (!unseen.includes(nad)) unseen.push(nad)
  return { ref, pod, pools, liveReads, missingNads, unseen, attached, problems }
}

/** `f.unseen` without the networks whose pools, read live, show the pod's entries. */
export const unseenAfterReads = (f: PodFindings, live: ReadonlyMap<string, ParsedPool>): ReadonlyArray<string> =>
  f.unseen.filter((nad) => !(f.attached.find((a) => a.nad === nad)?.pools.some((name) => live.get(name)?.entries.some((e) => e.podref === f.ref) === true) ?? false))

/** Two incarnations of one pod (same name, other uid) share the podref, so they own the same entries: one finding for both. */
export const mergeFindings = (a: PodFindings, b: PodFindings): PodFindings => {
  const pools = new Map([...a.pools, ...[...b.pools].filter(([name]) => !a.pools.has(name))])
  const liveReads = new Map([...a.liveReads, ...[...b.liveReads].filter(([name]) => !pools.has(name) && !a.liveReads.has(name))])
  return {
    ...a,
    pools,
    liveReads,
    missingNads: [...new Set([...a.missingNads, ...b.missingNads])],
    // Unseen by both: an incarnation whose entries were found has nothing left to look for there.
    unseen: a.unseen.filter((n) => b.unseen.includes(n)),
    attached: [...a.attached, ...b.attached.filter((x) => !a.attached.some((y) => y.nad === x.nad))],
    problems: [...a.problems, ...b.problems.filter((p) => !a.problems.some((q) => q.text === p.text))]
  }
}

/**
 * The NAD an entry came from by the pod's own status (the attachment listing its address, else the one
 * on its interface): what an Event names first, as a pool's writers may be several or none readable.
 */
const networkOnPod = (pod: PodProjection, entry: PoolEntry): string | undefined => {
  const secondary = statusEntries(pod).filter((e) => e.default !== true)
  const onInterface = entry.ifname === undefined || entry.ifname === "" ? undefined : secondary.find((e) => e.interface === entry.ifname)
  const match = secondary.find((e) => listsIP(e, entry.ip)) ?? onInterface
  return match === undefined ? undefined : statusAttachment(match, pod.namespace).name
}

/** The reservation of an address of a pool, the one naming rule of every path: Snapshot.reservationNetwork, unknown NADs "named". */
const reservationOf = (pool: ParsedPool, ip: IPAddress, snapshot: Snapshot): string | undefined => {
  const network = snapshot.reservationNetwork(pool, "named")
  return network === undefined ? undefined : reservationName(ip, network)
}

/**
 * A deleted pod's holding: its entries in the pools found (read live included), and its reservations
 * by the podref index and by its entries' addresses. Pass the snapshot from before the live
 * re-check: a reservation created after it can only be a reborn pod's.
 */
export const deletedPodHolding = (
  f: PodFindings,
  livePools: ReadonlyMap<string, ParsedPool>,
  snapshot: Snapshot,
  as: Pick<Holding, "claim" | "trigger"> = { claim: "Deleted", trigger: "deletion" }
): Holding => {
  const found: Array<Found<ParsedPool>> = [...f.pools.values()]
  for (const read of f.liveReads.values()) {
    const pool = livePools.get(read.pool)
    if (pool !== undefined && !f.pools.has(read.pool)) found.push({ ...read, pool })
  }
  const entries: Array<HeldEntry> = []
  const names = new Set(snapshot.reservationsHeldBy(f.ref).map((r) => r.name))
  for (const { pool, network } of found) {
    for (const entry of pool.entries) {
      if (entry.podref !== f.ref) continue
      const reservation = reservationOf(pool, entry.ip, snapshot)
      if (reservation !== undefined) names.add(reservation)
      entries.push({ pool: pool.name, entry, network: networkOnPod(f.pod, entry) ?? network, reservation })
    }
  }
  // One the snapshot shows under another podref may since have been re-created for this pod (the
  // snapshot lags the watch): it goes without `listed`, so it is read live and deleted only if it is this pod's then.
  const reservations = [...names].map((name): HeldReservation => {
    const listed = snapshot.reservation(name)
    return { name, listed: listed?.podref === f.ref ? listed : undefined, ip: undefined, orphan: undefined }
  })
  const ifFreed = f.missingNads.map((nad): EventIntent => ({ regarding: podObject(f.pod), type: "Warning", reason: REASON_NAD_MISSING, message: nadMissingMessage(nad) }))
  return { podref: f.ref, pod: podIdentity(f.pod), ...as, entries, reservations, problems: f.problems, ifFreed, error: undefined }
}

/** An entry of a pool as a holding's: the network its Event names (a NAD that writes the pool, one in the pod's namespace first) and its address's reservation. */
export const heldEntry = (poolName: string, pool: ParsedPool | undefined, entry: PoolEntry, snapshot: Snapshot): HeldEntry => ({
  pool: poolName,
  entry,
  network: pool === undefined ? poolName : snapshot.eventNetwork(pool, splitPodRef(entry.podref)?.namespace ?? ""),
  reservation: pool === undefined ? undefined : reservationOf(pool, entry.ip, snapshot)
})

type Gathered = { readonly entries: Array<HeldEntry>; readonly reservations: Array<HeldReservation> }

/**
 * Gathers entries and reservations per podref in first-seen order (`of(podref)`, made on first use),
 * and makes them holdings that nothing failed in.
 */
export const gatherByPodref = () => {
  const byRef = new Map<string, Gathered>()
  const of = (podref: string): Gathered => {
    let g = byRef.get(podref)
    if (g === undefined) byRef.set(podref, (g = { entries: [], reservations: [] }))
    return g
  }
  const holdings = (as: (podref: string) => Pick<Holding, "claim" | "trigger" | "operator"> & { readonly uid: string }): ReadonlyArray<Holding> =>
    [...byRef].map(([podref, g]) => {
      const { uid, ...rest } = as(podref)
      const pod = splitPodRef(podref)
      return { podref, pod: pod === undefined ? undefined : { ...pod, uid }, ...rest, ...g, problems: [], ifFreed: [], error: undefined }
    })
  return { byRef, of, holdings }
}

/**
 * The sweep's orphans as holdings, one per podref; Events name the NAD that writes each pool where
 * one does. The orphans of a pod that exists but will never run again are that incarnation's.
 */
export const orphanHoldings = (
  orphans: Orphans,
  pools: ReadonlyMap<string, ParsedPool>,
  listed: ReadonlyMap<string, ReservationRecord>,
  snapshot: Snapshot,
  livePods: ReadonlyMap<string, PodProjection> = new Map()
): ReadonlyArray<Holding> => {
  const { of, holdings } = gatherByPodref()
  for (const o of orphans.allocations) of(o.entry.podref).entries.push(heldEntry(o.pool, pools.get(o.pool), o.entry, snapshot))
  for (const o of orphans.reservations) of(o.podref).reservations.push({ name: o.name, listed: listed.get(o.name), ip: o.ip, orphan: o.reason })
  const ended = new Set([
    ...orphans.allocations.flatMap((o) => (o.reason === "NeverRunsAgain" ? [o.entry.podref] : [])),
    ...orphans.reservations.flatMap((o) => (o.reason === "NeverRunsAgain" ? [o.podref] : []))
  ])
  return holdings((podref) =>
    ended.has(podref) ? { claim: "NeverRunsAgain", trigger: "sweep", uid: livePods.get(podref)?.uid ?? "" } : { claim: "Orphan", trigger: "sweep", uid: "" }
  )
}
