/**
 * The one rule for "does a live pod still hold this?", for the sweep's orphan detection and the
 * planner's live re-check alike. A live pod whose status cannot prove anything keeps its addresses.
 */
import type { IPAddress } from "./ip.ts"
import { type PodProjection, podHoldsIP } from "./pod.ts"

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
