/**
 * The bad input a sweep meets, for audit to list: NADs whose whereabouts config cannot be read,
 * pool entries that cannot be parsed, pods whose Multus annotations cannot be read. Each only
 * skips what it describes (the sweep goes on), so an operator who never reads the logs still
 * learns what the controller cannot judge. A NAD with another IPAM, or none, is not bad input;
 * nor is one whose config lives on the nodes' disks (an empty spec.config). Pure.
 */
import { Either } from "effect"
import { type DecodedNad, notOurs } from "./ipam-config.ts"
import { type PodProjection, podAttachments } from "./pod.ts"
import type { ParsedPool } from "./pool.ts"

export interface BadInput {
  readonly nads: ReadonlyArray<{ readonly namespace: string; readonly name: string; readonly why: string }>
  /** `key` as written (an offset that may not be one). */
  readonly poolEntries: ReadonlyArray<{ readonly pool: string; readonly key: string; readonly reason: string }>
  readonly pods: ReadonlyArray<{ readonly namespace: string; readonly name: string; readonly annotation: string; readonly why: string }>
}

/** What of these NADs, pools and pods cannot be read, each with what is wrong. */
export const badInputOf = (nads: ReadonlyArray<DecodedNad>, pools: ReadonlyArray<ParsedPool>, pods: Iterable<PodProjection>): BadInput => ({
  nads: nads.flatMap((n) => (Either.isLeft(n.config) && !notOurs(n.config.left) ? [{ namespace: n.namespace, name: n.name, why: n.config.left.message }] : [])),
  poolEntries: pools.flatMap((p) => p.invalid.map((bad) => ({ pool: p.name, key: bad.key, reason: bad.reason }))),
  pods: [...pods].flatMap((pod) => {
    const decoded = podAttachments(pod)
    return Either.isLeft(decoded) ? [{ namespace: pod.namespace, name: pod.name, annotation: decoded.left.annotation, why: decoded.left.message }] : []
  })
})

/** Whether there is any. */
export const hasBadInput = (b: BadInput): boolean => b.nads.length + b.poolEntries.length + b.pods.length > 0
