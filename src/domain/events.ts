/**
 * The Events the controller writes: reasons and message formats as exported constants (users
 * grep for them; the first two are upstream whereabouts' exact strings), and the intent to write
 * one, which the planner produces and the executor carries out.
 */

/** Successful release of one address. Message: `garbageCollectedMessage`. */
export const REASON_GARBAGE_COLLECTED = "IPAddressGarbageCollected"
/** Giving up on a pod's addresses. Message: `gcFailedMessage`. */
export const REASON_GC_FAILED = "IPAddressGarbageCollectionFailed"
export const REASON_NAD_MISSING = "NetworkAttachmentDefinitionNotFound"
export const REASON_BAD_CONFIG = "InvalidIPAMConfig"
export const REASON_BAD_ANNOTATION = "InvalidNetworkAnnotation"
export const REASON_POOL_NEARLY_FULL = "IPPoolNearlyFull"
/** A schedule in the ConfigMap that does not parse; the previous one stays. */
export const REASON_BAD_SCHEDULE = "InvalidReconcileSchedule"

/** Message of `REASON_GARBAGE_COLLECTED` (whereabouts' exact wording). */
export const garbageCollectedMessage = (ip: string, network: string): string => `successful cleanup of IP address [${ip}] from network ${network}`

/** Appended (in parentheses) to `garbageCollectedMessage` when an operator's release freed the address. */
export const OPERATOR_RELEASE_NOTE = "released by an operator"
/** The same, for a release forced while a pod of that name might still run (release --force). */
export const OPERATOR_FORCED_NOTE = "released by an operator with --force"

/** Message of `REASON_GC_FAILED` (whereabouts' exact wording). */
export const gcFailedMessage = (namespace: string, name: string): string => `failed to garbage collect addresses for pod ${namespace}/${name}`

/** Message of `REASON_NAD_MISSING`. */
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
export const podObject = (pod: { readonly namespace: string; readonly name: string; readonly uid: string }): InvolvedObject => ({
  kind: "Pod",
  namespace: pod.namespace,
  name: pod.name,
  uid: pod.uid
})
