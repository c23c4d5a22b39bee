/**
 * The small projection of a pod that the controller caches and queues (never a full pod),
 * and what it tells about the pod's secondary networks.
 */
import { Either } from "effect"
import { intern, internOptional } from "./intern.ts"
import type { IPAddress } from "./ip.ts"
import {
  type AnnotationError, type Attachment, type NetworkStatusEntry, LEGACY_NETWORK_STATUS_ANNOTATION, NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION,
  compactNetworkStatus, decodeNetworkSelection, decodeNetworkStatus, listsIP, readNetworkStatus, statusAttachment
} from "./multus.ts"

export interface PodProjection {
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly resourceVersion?: string | undefined
  readonly deletionTimestamp?: string | undefined
  readonly nodeName?: string | undefined
  readonly phase?: string | undefined
  /** `status.reason` ("Evicted" for a pod the kubelet evicted). */
  readonly phaseReason?: string | undefined
  /** The reason of a true DisruptionTarget condition ("DeletionByTaintManager", …). */
  readonly disruption?: string | undefined
  /** `network-status` (or legacy `networks-status`) annotation, compacted (`compactNetworkStatus`). */
  readonly networkStatus?: string | undefined
  /** Set (only) when `networkStatus` is the legacy annotation's, so that its errors name that one. */
  readonly legacyStatus?: true
  /** Raw `networks` selection annotation. */
  readonly networks?: string | undefined
}

/** A pod incarnation: what Events and reports name. */
export type PodIdentity = Pick<PodProjection, "namespace" | "name" | "uid">
export const podIdentity = (pod: PodIdentity): PodIdentity => ({ namespace: pod.namespace, name: pod.name, uid: pod.uid })

/** An object named within its namespace (client-go's types.NamespacedName). */
export type NamespacedName = { readonly namespace: string; readonly name: string }

/** The `namespace/name` whereabouts writes as `podref`. */
export const podRef = (pod: NamespacedName): string => `${pod.namespace}/${pod.name}`

/** Splits a podref; undefined when it is not `namespace/name`. */
export const splitPodRef = (ref: string): NamespacedName | undefined => {
  const parts = ref.split("/")
  return parts.length === 2 && parts[0] !== "" && parts[1] !== "" ? { namespace: parts[0]!, name: parts[1]! } : undefined
}

interface PodLike {
  readonly metadata?: {
    readonly namespace?: string | undefined
    readonly name?: string | undefined
    readonly uid?: string | undefined
    readonly resourceVersion?: string | undefined
    readonly deletionTimestamp?: Date | string | undefined
    readonly annotations?: Readonly<Record<string, string>> | undefined
  } | undefined
  readonly spec?: { readonly nodeName?: string | undefined } | undefined
  readonly status?:
    | {
        readonly phase?: string | undefined
        readonly reason?: string | undefined
        readonly conditions?: ReadonlyArray<{ readonly type?: string | undefined; readonly status?: string | undefined; readonly reason?: string | undefined }> | undefined
      }
    | undefined
}

const nonEmpty = (s: string | undefined): string | undefined => (s === undefined || s === "" ? undefined : s)
const compactOptional = (s: string | undefined): string | undefined => (s === undefined ? undefined : compactNetworkStatus(s))

/** Projects a full pod (API object) to what the controller keeps; strings many pods repeat are interned. */
export const projectPod = (pod: PodLike): PodProjection => {
  const m = pod.metadata ?? {}
  const a = m.annotations ?? {}
  const ts = m.deletionTimestamp
  const status = nonEmpty(a[NETWORK_STATUS_ANNOTATION])
  const legacy = status === undefined ? nonEmpty(a[LEGACY_NETWORK_STATUS_ANNOTATION]) : undefined
  return {
    namespace: intern(m.namespace ?? ""),
    name: m.name ?? "",
    uid: m.uid ?? "",
    resourceVersion: m.resourceVersion,
    deletionTimestamp: ts === undefined ? undefined : ts instanceof Date ? ts.toISOString() : ts,
    nodeName: internOptional(nonEmpty(pod.spec?.nodeName)),
    phase: internOptional(nonEmpty(pod.status?.phase)),
    phaseReason: internOptional(nonEmpty(pod.status?.reason)),
    disruption: internOptional(nonEmpty(pod.status?.conditions?.find((c) => c.type === "DisruptionTarget" && c.status === "True")?.reason)),
    networkStatus: compactOptional(status ?? legacy),
    networks: nonEmpty(a[NETWORKS_ANNOTATION]),
    ...(legacy === undefined ? {} : { legacyStatus: true })
  }
}

/**
 * The secondary networks of a pod: from `network-status` (default entries skipped), or, when it
 * is missing or empty, from the `networks` request.
 */
export const podAttachments = (pod: PodProjection): Either.Either<ReadonlyArray<Attachment>, AnnotationError> =>
  Either.gen(function* () {
    if (pod.networkStatus !== undefined && pod.networkStatus.trim() !== "") {
      const entries = yield* decodeNetworkStatus(pod.networkStatus, pod.legacyStatus ? LEGACY_NETWORK_STATUS_ANNOTATION : NETWORK_STATUS_ANNOTATION)
      if (entries.length > 0) return entries.filter((e) => e.default !== true).map((e) => statusAttachment(e, pod.namespace))
    }
    return pod.networks === undefined ? [] : yield* decodeNetworkSelection(pod.networks, pod.namespace)
  })

export type Holding = "holds" | "not-held" | "unknown"

/** The entries of a pod's `network-status`; none when it has none or it cannot be read. */
export const statusEntries = (pod: PodProjection): ReadonlyArray<NetworkStatusEntry> =>
  (pod.networkStatus === undefined ? undefined : readNetworkStatus(pod.networkStatus)) ?? []

/**
 * Whether a live pod holds `ip` on `ifname`, judged from its `network-status` alone. Default-network
 * entries count too: whereabouts can be the pod network's own IPAM (a KubeVirt VM's, say).
 * "unknown" (pending, no or unreadable status) means: not sure, so keep the address.
 */
export const podHoldsIP = (pod: PodProjection, ip: IPAddress, ifname: string | undefined): Holding => {
  const listed = pod.phase === "Pending" ? [] : statusEntries(pod)
  if (listed.length === 0) return "unknown"
  if (listed.some((e) => listsIP(e, ip))) return "holds"
  // An interface the status does not list may still be coming up: only a listed one is proof.
  if (ifname !== undefined && ifname !== "" && !listed.some((e) => e.interface === ifname)) return "unknown"
  return "not-held"
}
