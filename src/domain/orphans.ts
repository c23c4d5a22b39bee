/**
 * Orphan detection for the full scan: pools × live pods (× reservations) → what nobody holds; and the
 * one rule for "does a live pod still hold this?", which the planner's live re-check applies too. A
 * live pod whose status cannot prove anything keeps its addresses.
 */
import { type IPAddress, ipKey } from "./ip.ts"
import type { NeverRunsAgain } from "./never-runs-again.ts"
import { type PodProjection, podHoldsIP } from "./pod.ts"
import { type ParsedPool, type PoolEntry, type ReservationRecord, parseReservationName, poolNetworkName } from "./pool.ts"

/** PodGone: no pod of the podref; IPNotOnPod: the live pod's status does not list it; NeverRunsAgain: the live pod will not run again. */
export type AllocationOrphanReason = "PodGone" | "IPNotOnPod" | "NeverRunsAgain"
export type ReservationOrphanReason = AllocationOrphanReason | "NoAllocation"

/** Why an allocation is an orphan given the pod now named by its podref, or undefined when that pod (maybe) holds it. */
export const allocationOrphanReason = (live: PodProjection | undefined, ip: IPAddress, ifname: string | undefined): AllocationOrphanReason | undefined => {
  if (live === undefined) return "PodGone"
  return podHoldsIP(live, ip, ifname) === "not-held" ? "IPNotOnPod" : undefined
}

/** Why an entry must stay, or undefined when it may be freed. */
export const entryVerdict = (live: PodProjection | undefined, ip: IPAddress, ifname: string | undefined): string | undefined =>
  allocationOrphanReason(live, ip, ifname) === undefined ? `the live pod (uid ${live?.uid ?? "?"}) may hold it` : undefined

/**
 * Why a reservation must stay, or undefined when it may be deleted. A live pod keeps it unless its
 * status proves it lacks the address; and one the listing found without a pod (PodGone) that has
 * a pod now was re-created since, with this reservation quite possibly its own.
 */
export const reservationVerdict = (
  live: PodProjection | undefined,
  r: { readonly ip: IPAddress | undefined; readonly orphan: ReservationOrphanReason | undefined }
): string | undefined => {
  if (live === undefined) return undefined
  if (r.orphan === "PodGone") return `the pod was re-created (uid ${live.uid}) since the listing`
  if (r.ip === undefined) return "its name does not read as an address"
  return podHoldsIP(live, r.ip, undefined) === "not-held" ? undefined : `the live pod (uid ${live.uid}) may hold it`
}

export interface OrphanAllocation {
  readonly pool: string
  readonly entry: PoolEntry
  readonly reason: AllocationOrphanReason
  /** Why its pod will never run again ("pod Succeeded", …), for NeverRunsAgain. */
  readonly detail?: string
}

export interface OrphanReservation {
  readonly name: string
  readonly podref: string
  readonly ip: IPAddress | undefined
  readonly networkName: string | undefined
  readonly reason: ReservationOrphanReason
  readonly detail?: string
}

export interface Orphans {
  readonly allocations: ReadonlyArray<OrphanAllocation>
  readonly reservations: ReadonlyArray<OrphanReservation>
}

export const ORPHAN_REASON_TEXT: Record<ReservationOrphanReason, string> = {
  PodGone: "no live pod has this podref",
  IPNotOnPod: "the live pod's network-status does not list this IP",
  NoAllocation: "no IPPool allocation of this pod holds this IP",
  NeverRunsAgain: "the pod still exists but will never run again"
}

interface FindOrphansOptions {
  /** The network a pool's reservations are named with (node-slice pools do not encode it in their names the usual way). */
  readonly networkOf?: (pool: ParsedPool) => string | undefined
  /** The never-run-again rule: a live pod it names holds nothing any more. */
  readonly neverRunsAgain?: (pod: PodProjection) => NeverRunsAgain | undefined
}

/**
 * The allocations of one address in one network: by podref, the orphan reason of that podref's
 * allocation (undefined: held, which wins over an orphaned one of the same podref). Almost every
 * address has one, kept as a pair; a Map only where two podrefs share an address.
 */
type Holders = { readonly podref: string; reason: AllocationOrphanReason | undefined } | Map<string, AllocationOrphanReason | undefined>

const addHolder = (byIp: Map<string, Holders>, k: string, podref: string, reason: AllocationOrphanReason | undefined) => {
  const h = byIp.get(k)
  if (h === undefined) byIp.set(k, { podref, reason })
  else if (h instanceof Map) {
    if (!h.has(podref) || reason === undefined) h.set(podref, reason)
  } else if (h.podref === podref) {
    if (reason === undefined) h.reason = undefined
  } else byIp.set(k, new Map([[h.podref, h.reason], [podref, reason]]))
}

const holderOf = (h: Holders | undefined, podref: string): { readonly holds: boolean; readonly reason?: AllocationOrphanReason | undefined } => {
  if (h === undefined) return { holds: false }
  if (h instanceof Map) return h.has(podref) ? { holds: true, reason: h.get(podref) } : { holds: false }
  return h.podref === podref ? { holds: true, reason: h.reason } : { holds: false }
}

/**
 * Finds orphaned allocations and reservations. Pass reservations listed *before* the pools
 * were, so a reservation created by a concurrent CNI ADD always finds its allocation.
 */
export const findOrphans = (
  pools: ReadonlyArray<ParsedPool>,
  livePods: ReadonlyMap<string, PodProjection>,
  reservations: ReadonlyArray<Pick<ReservationRecord, "name" | "podref">> = [],
  options: FindOrphansOptions = {}
): Orphans => {
  const networkOf = options.networkOf ?? ((pool: ParsedPool) => poolNetworkName(pool.name, pool.range))
  const ended = new Map<string, NeverRunsAgain>()
  for (const [ref, pod] of livePods) {
    const why = options.neverRunsAgain?.(pod)
    if (why !== undefined) ended.set(ref, why)
  }
  const allocations: Array<OrphanAllocation> = []
  // network name → ip → its allocations' holders; only the reservations read it
  const holders = new Map<string, Map<string, Holders>>()
  const keepHolders = reservations.length > 0
  for (const pool of pools) {
    const network = networkOf(pool) ?? pool.name
    let byIp = holders.get(network)
    if (byIp === undefined) holders.set(network, (byIp = new Map()))
    for (const entry of pool.entries) {
      const why = ended.get(entry.podref)
      const reason = why !== undefined ? "NeverRunsAgain" : allocationOrphanReason(livePods.get(entry.podref), entry.ip, entry.ifname)
      if (reason !== undefined) allocations.push({ pool: pool.name, entry, reason, ...(why === undefined ? {} : { detail: why.detail }) })
      if (keepHolders) addHolder(byIp, ipKey(entry.ip), entry.podref, reason)
    }
  }
  const orphanReservations: Array<OrphanReservation> = []
  for (const r of reservations) {
    const podref = r.podref
    const candidates = parseReservationName(r.name)
    // Names are ambiguous ("dead-beef-2001-db8--5" also reads as the unnamed IP dead:beef:2001:db8::5):
    // prefer the reading under which this pod has an allocation, then one naming a known network.
    const parsed =
      candidates.find((c) => holderOf(holders.get(c.networkName)?.get(ipKey(c.ip)), podref).holds) ??
      candidates.find((c) => holders.has(c.networkName)) ??
      candidates[0]
    const base = { name: r.name, podref, ip: parsed?.ip, networkName: parsed?.networkName }
    if (!livePods.has(podref)) {
      orphanReservations.push({ ...base, reason: "PodGone" })
      continue
    }
    const why = ended.get(podref)
    if (why !== undefined) {
      orphanReservations.push({ ...base, reason: "NeverRunsAgain", detail: why.detail })
      continue
    }
    // A name we cannot read is never deleted while its pod lives.
    if (parsed === undefined) continue
    const held = holderOf(holders.get(parsed.networkName)?.get(ipKey(parsed.ip)), podref)
    if (!held.holds) orphanReservations.push({ ...base, reason: "NoAllocation" })
    else if (held.reason !== undefined) orphanReservations.push({ ...base, reason: held.reason })
  }
  return { allocations, reservations: orphanReservations }
}
