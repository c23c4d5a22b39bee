/**
 * The bad input a sweep meets, for audit to list: NADs whose whereabouts config cannot be read,
 * pool entries that cannot be parsed, pods whose Multus annotations cannot be read. Each only
 * skips what it describes (the sweep goes on), so an operator who never reads the logs still
 * learns what the controller cannot judge. A NAD with another IPAM, or none, is not bad input;
 * nor is one whose config lives on the nodes' disks (an empty spec.config). Pure.
 */
import { Either } from "effect"
import type { IpamConfigError, NadConfigResult } from "./ipam-config.ts"
import { type PodProjection, podAttachments } from "./pod.ts"
import type { ParsedPool } from "./pool.ts"

export interface BadNad {
  readonly namespace: string
  readonly name: string
  readonly why: string
}

export interface BadPoolEntry {
  readonly pool: string
  /** The allocation's key as written (an offset that may not be one). */
  readonly key: string
  readonly reason: string
}

export interface BadPodAnnotation {
  readonly namespace: string
  readonly name: string
  readonly annotation: string
  readonly why: string
}

export interface BadInput {
  readonly nads: ReadonlyArray<BadNad>
  readonly poolEntries: ReadonlyArray<BadPoolEntry>
  readonly pods: ReadonlyArray<BadPodAnnotation>
}

export const NO_BAD_INPUT: BadInput = { nads: [], poolEntries: [], pods: [] }

/** A NAD as decoded: its whereabouts config, or why it cannot be read. */
export interface DecodedNad {
  readonly namespace: string
  readonly name: string
  readonly decoded: Either.Either<NadConfigResult, IpamConfigError>
}

/** Not whereabouts' to judge: no ipam at all, or the config on the nodes' disks. */
const notOurs = (e: IpamConfigError) => e.reason === "MissingIpam" || e.reason === "EmptyConfig"

/** What of these NADs, pools and pods cannot be read, each with what is wrong. */
export const badInputOf = (nads: ReadonlyArray<DecodedNad>, pools: ReadonlyArray<ParsedPool>, pods: Iterable<PodProjection>): BadInput => ({
  nads: nads.flatMap((n) => (Either.isLeft(n.decoded) && !notOurs(n.decoded.left) ? [{ namespace: n.namespace, name: n.name, why: n.decoded.left.message }] : [])),
  poolEntries: pools.flatMap((p) => p.invalid.map((bad) => ({ pool: p.name, key: bad.key, reason: bad.reason }))),
  pods: [...pods].flatMap((pod) => {
    const decoded = podAttachments(pod)
    return Either.isLeft(decoded) ? [{ namespace: pod.namespace, name: pod.name, annotation: decoded.left.annotation, why: decoded.left.message }] : []
  })
})

/** Whether there is any. */
export const hasBadInput = (b: BadInput): boolean => b.nads.length + b.poolEntries.length + b.pods.length > 0
