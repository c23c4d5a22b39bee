/**
 * Pods that still exist but will never run again (rule 7 of release.ts), so their addresses can be
 * freed while their objects remain: finished pods (Succeeded or Failed, final by the API's
 * contract), pods evicted (by the kubelet, or by the taint manager from an unreachable node, as
 * upstream's reconciler frees), and terminating pods whose node is gone, out of service, or (opt-in)
 * not ready for long. Pure: the caller brings the node facts and the time.
 */
import type { PodProjection } from "./pod.ts"

/** The taint that declares a node dead (non-graceful node shutdown): its pods will not run again. */
export const OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
/** The DisruptionTarget reason of a pod the taint manager evicted. */
const TAINT_MANAGER_EVICTION = "DeletionByTaintManager"

/** What the controller keeps of a Node. */
export interface NodeRecord {
  readonly name: string
  readonly resourceVersion: string | undefined
  /** Status of the Ready condition ("True", "False", "Unknown"), and since when (RFC 3339). */
  readonly ready: string | undefined
  readonly readySince: string | undefined
  /** Carries the out-of-service taint. */
  readonly outOfService: boolean
}

/** What is known of a pod's node: present, gone (the node cache is synced and has no such node), or unknown. */
export type NodeFact = { readonly _tag: "Present"; readonly node: NodeRecord } | { readonly _tag: "Gone" } | { readonly _tag: "Unknown" }

/** A pod's node in one view of the nodes (cache, listing, live reads): gone where the view `covers` its name yet lacks it. */
export const nodeFactOf = (pod: PodProjection, record: (name: string) => NodeRecord | undefined, covers: (name: string) => boolean): NodeFact => {
  const node = pod.nodeName === undefined ? undefined : record(pod.nodeName)
  return node !== undefined ? { _tag: "Present", node } : pod.nodeName !== undefined && covers(pod.nodeName) ? { _tag: "Gone" } : { _tag: "Unknown" }
}

export interface NeverRunsAgainPolicy {
  readonly freeTerminalPods: boolean
  readonly freeEvictedPods: boolean
  readonly freeOnOutOfService: boolean
  /** Extra wait after a terminating pod's grace period ends before its node's state counts. */
  readonly terminatingGraceMs: number
  /** Opt-in: a terminating pod's node NotReady or Unknown for this long; undefined turns it off. */
  readonly freeOnNotReadyAfterMs: number | undefined
}

/** The trigger label of `ips_freed_total`. */
export const NEVER_RUNS_AGAIN_REASONS = ["terminal", "evicted", "node-gone", "out-of-service", "not-ready"] as const
export type NeverRunsAgainReason = (typeof NEVER_RUNS_AGAIN_REASONS)[number]

export interface NeverRunsAgain {
  readonly reason: NeverRunsAgainReason
  /** Why, as Events and logs say it: "pod Succeeded", "node gone", … */
  readonly detail: string
}

const time = (text: string | undefined): number | undefined => {
  const t = text === undefined ? Number.NaN : Date.parse(text)
  return Number.isNaN(t) ? undefined : t
}

/** A terminating pod's node, judged once its grace (and ours) has passed; when that is not yet, the time it will be. */
const byNode = (pod: PodProjection, node: NodeFact, now: number, p: NeverRunsAgainPolicy): NeverRunsAgain | number | undefined => {
  const deletion = time(pod.deletionTimestamp)
  if (deletion === undefined || pod.nodeName === undefined || node._tag === "Unknown") return undefined
  const from = deletion + p.terminatingGraceMs
  const after = (at: number, verdict: NeverRunsAgain) => (now < at ? at : verdict)
  if (node._tag === "Gone") return after(from, { reason: "node-gone", detail: "node gone" })
  if (node.node.outOfService && p.freeOnOutOfService) return after(from, { reason: "out-of-service", detail: "node out of service" })
  if (p.freeOnNotReadyAfterMs === undefined || node.node.ready === "True") return undefined
  const since = time(node.node.readySince)
  return since === undefined ? undefined : after(Math.max(from, since + p.freeOnNotReadyAfterMs), { reason: "not-ready", detail: "node not ready" })
}

/** Why the pod will never run again, or undefined when it may (or when that is not known). */
export const neverRunsAgain = (pod: PodProjection, node: NodeFact, now: number, p: NeverRunsAgainPolicy): NeverRunsAgain | undefined => {
  if (pod.phase === "Failed" && pod.phaseReason === "Evicted") return p.freeEvictedPods ? { reason: "evicted", detail: "pod evicted" } : undefined
  if (pod.phase === "Succeeded" || pod.phase === "Failed") return p.freeTerminalPods ? { reason: "terminal", detail: `pod ${pod.phase}` } : undefined
  if (pod.deletionTimestamp !== undefined && pod.disruption === TAINT_MANAGER_EVICTION) {
    return p.freeEvictedPods ? { reason: "evicted", detail: "pod evicted by the taint manager" } : undefined
  }
  const verdict = byNode(pod, node, now, p)
  return typeof verdict === "object" ? verdict : undefined
}

/**
 * When the rule will hold for this pod if nothing else changes (its grace, or its node's
 * NotReady time, running out), so the caller can look again then; undefined when it holds now
 * or never will on the facts at hand.
 */
export const neverRunsAgainAt = (pod: PodProjection, node: NodeFact, now: number, p: NeverRunsAgainPolicy): number | undefined => {
  if (neverRunsAgain(pod, node, now, p) !== undefined) return undefined
  const verdict = byNode(pod, node, now, p)
  return typeof verdict === "number" ? verdict : undefined
}
