/**
 * What an operator names for `release --pod/--ip`, as the planner's holdings (claim "Operator",
 * rule 9 of release.ts), one per podref however it was named: a pod's podref with everything it
 * holds and its reservations, or one address of a pool with its reservation. Pure.
 */
import { type Snapshot, deletedPodHolding, findPodHoldings, gatherByPodref, heldEntry } from "./holdings.ts"
import { type IPAddress, formatIP, ipEquals } from "./ip.ts"
import { type NamespacedName, podRef } from "./pod.ts"
import { reservationName } from "./pool.ts"
import type { HeldEntry, HeldReservation, Holding } from "./release.ts"

/** What release named: pods by namespace/name, addresses by pool and IP. */
export interface NamedTargets {
  readonly pods: ReadonlyArray<NamespacedName>
  readonly ips: ReadonlyArray<{ readonly pool: string; readonly ip: IPAddress }>
  readonly force: boolean
}

/**
 * "already free": nothing holds it any more (freed before, by whoever): done, not a failure, so a
 * retried release exits 0; "refused": a pod of that name may run (--force); "skipped": changed, or kept by the rules.
 */
export type RowResult = "freed" | "would free" | "already free" | "skipped" | "refused" | "failed"

/** Something release was asked to free and what became of it (here: what is not handed on, and why). */
export interface ReleaseRow {
  readonly result: RowResult
  readonly kind: "allocation" | "reservation" | "pod"
  /** The pool of an allocation, the name of a reservation; "" for a pod. */
  readonly name: string
  readonly ip: string | undefined
  readonly podref: string
  /** Why it was not freed now ("" for what was). */
  readonly why: string
}

export const skipResult = (free: boolean): RowResult => (free ? "already free" : "skipped")

/** The holdings (claim Operator) of what was named, and what was named but holds nothing. */
export const namedHoldings = (targets: NamedTargets, snapshot: Snapshot): { readonly holdings: ReadonlyArray<Holding>; readonly skipped: ReadonlyArray<ReleaseRow> } => {
  const skipped: Array<ReleaseRow> = []
  const gathered = gatherByPodref()
  const addEntry = (podref: string, e: HeldEntry) => {
    const g = gathered.of(podref)
    if (!g.entries.some((x) => x.pool === e.pool && x.entry.key === e.entry.key)) g.entries.push(e)
  }
  const addReservation = (podref: string, r: HeldReservation) => {
    const g = gathered.of(podref)
    if (!g.reservations.some((x) => x.name === r.name)) g.reservations.push(r)
  }
  for (const pod of targets.pods) {
    const ref = podRef(pod)
    // The podref index over every pool listed: whatever the pod's annotations say or do not say.
    const found = deletedPodHolding(findPodHoldings({ ...pod, uid: "" }, snapshot), new Map(), snapshot)
    // Only reservations that exist and are this podref's: one listed for nobody is nothing to free.
    const reservations = found.reservations.filter((r) => r.listed?.podref === ref)
    if (found.entries.length === 0 && reservations.length === 0) skipped.push({ result: "already free", kind: "pod", name: "", ip: undefined, podref: ref, why: `pod ${ref} holds no address in these pools` })
    found.entries.forEach((e) => addEntry(ref, e))
    reservations.forEach((r) => addReservation(ref, r))
  }
  for (const target of targets.ips) {
    const skip = (why: string, free = false) => skipped.push({ result: skipResult(free), kind: "allocation", name: target.pool, ip: formatIP(target.ip), podref: "", why })
    const pool = snapshot.pool(target.pool)
    const entry = pool?.entries.find((e) => ipEquals(e.ip, target.ip))
    if (pool === undefined) skip(`no pool ${target.pool}`)
    else if (entry === undefined) skip(`pool ${target.pool} holds no allocation of ${formatIP(target.ip)}`, true)
    else {
      addEntry(entry.podref, heldEntry(pool.name, pool, entry, snapshot))
      // The address's reservation on the pool's network if one exists for this podref, whatever the NADs say
      // now: one kept from before they turned overlapping ranges off is this entry's too.
      const network = snapshot.origin(pool).network
      const listed = network === undefined ? undefined : snapshot.reservation(reservationName(entry.ip, network))
      if (listed !== undefined && listed.podref === entry.podref) addReservation(entry.podref, { name: listed.name, listed, ip: entry.ip, orphan: undefined })
    }
  }
  const holdings = gathered.holdings(() => ({ claim: "Operator", trigger: "operator", uid: "", operator: { force: targets.force } }))
  return { holdings, skipped }
}
