/**
 * The Events the controller writes: reasons and message formats as exported constants (users grep
 * for them; the first two and their messages are upstream whereabouts' exact strings), and the
 * intent to write one, which the planner produces and the executor carries out.
 */

export const REASON_GARBAGE_COLLECTED = "IPAddressGarbageCollected"
/** Giving up on a pod's addresses. */
export const REASON_GC_FAILED = "IPAddressGarbageCollectionFailed"
export const REASON_NAD_MISSING = "NetworkAttachmentDefinitionNotFound"
export const REASON_BAD_CONFIG = "InvalidIPAMConfig"
export const REASON_BAD_ANNOTATION = "InvalidNetworkAnnotation"
export const REASON_POOL_NEARLY_FULL = "IPPoolNearlyFull"
/** A schedule in the ConfigMap that does not parse; the previous one stays. */
export const REASON_BAD_SCHEDULE = "InvalidReconcileSchedule"

// The invariant monitor's Warnings (invariants.ts), on every pod a violation involves, once per
// violation; each message names every object involved, so each pod's Event reads alone.
export const REASON_ADDRESS_NOT_HELD = "IPAddressNotHeld"
export const REASON_HELD_FOR_ANOTHER = "IPAddressHeldForAnother"
export const REASON_DUPLICATE_ADDRESS = "DuplicateIPAddress"
export const REASON_RESERVATION_DRIFT = "IPReservationDrift"

export const notHeldMessage = (ip: string, pod: string, network: string, pool: string): string =>
  `IP address ${ip} that pod ${pod} lists on network ${network} has no allocation in IPPool ${pool}: the next pod can be handed it`

export const heldForAnotherMessage = (ip: string, pod: string, network: string, pool: string, holder: string): string =>
  `IP address ${ip} that pod ${pod} lists on network ${network} is allocated to ${holder} in IPPool ${pool}`

/** A duplicate: two running pods list the address. */
export const listedTwiceMessage = (ip: string, a: { readonly pod: string; readonly network: string }, b: { readonly pod: string; readonly network: string }): string =>
  `IP address ${ip} is listed by two running pods in one network: ${a.pod} on ${a.network} and ${b.pod} on ${b.network}`

/** A duplicate: pools of one network hold the address for two running pods. */
export const heldTwiceMessage = (ip: string, holders: ReadonlyArray<{ readonly pod: string; readonly pool: string }>): string =>
  `IP address ${ip} is allocated more than once in one network: ${holders.map((h) => `to ${h.pod} in IPPool ${h.pool}`).join(" and ")}`

/** `owner` is whom the reservation names, undefined when it is missing. */
export const reservationDriftMessage = (ip: string, pod: string, pool: string, reservation: string, owner: string | undefined): string =>
  owner === undefined
    ? `IP address ${ip} that pod ${pod} holds in IPPool ${pool} has no OverlappingRangeIPReservation ${reservation}: an ADD in another pool of its network can be handed it`
    : `IP address ${ip} that pod ${pod} holds in IPPool ${pool} has its OverlappingRangeIPReservation ${reservation} naming ${owner}`

export const garbageCollectedMessage = (ip: string, network: string): string => `successful cleanup of IP address [${ip}] from network ${network}`

/** Appended (in parentheses) to `garbageCollectedMessage` when an operator's release freed the address, and when it was forced. */
export const OPERATOR_RELEASE_NOTE = "released by an operator"
export const OPERATOR_FORCED_NOTE = "released by an operator with --force"

export const gcFailedMessage = (namespace: string, name: string): string => `failed to garbage collect addresses for pod ${namespace}/${name}`

export const nadMissingMessage = (nad: string): string => `network-attachment-definition ${nad} not found; freeing the pod's addresses found by podref`

export interface InvolvedObject {
  /** Pods; the IPPools whose usage crosses the threshold; the ConfigMap of a schedule that does not parse. */
  readonly kind: "Pod" | "IPPool" | "ConfigMap"
  readonly namespace: string
  readonly name: string
  readonly uid: string
}

export type EventType = "Normal" | "Warning"

/** An Event to write. */
export interface EventIntent {
  readonly regarding: InvolvedObject
  readonly type: EventType
  readonly reason: string
  readonly message: string
}

/** The Pod an Event about a podref's addresses is about (uid "" when the pod is gone and unknown). */
export const podObject = (pod: { readonly namespace: string; readonly name: string; readonly uid: string }): InvolvedObject =>
  ({ kind: "Pod", namespace: pod.namespace, name: pod.name, uid: pod.uid })
