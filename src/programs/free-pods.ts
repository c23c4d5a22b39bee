/**
 * The release path for a batch of deleted pods (and pods that will never run again): what each held
 * (caches first, unseen pools read live), a live re-check that no pod of the name exists (or that this
 * incarnation still never runs again), then the plan, carried out with one patch per pool per batch.
 */
import { Effect, Either } from "effect"
import type { NeverRunsAgainReason } from "../domain/never-runs-again.ts"
import { type Snapshot, deletedPodHolding, findPodHoldings, mergeFindings, unseenAfterReads } from "../domain/holdings.ts"
import { type PodProjection, podRef } from "../domain/pod.ts"
import type { ParsedPool } from "../domain/pool.ts"
import { type Holding, Outcome, planRelease } from "../domain/release.ts"
import { Caches } from "../services/Caches.ts"
import type { ControllerConfig } from "../services/ControllerConfig.ts"
import type { EventRecorder } from "../services/EventRecorder.ts"
import { IPPoolStore } from "../services/IPPoolStore.ts"
import type { KubeError } from "../services/KubeError.ts"
import type { Metrics } from "../services/Metrics.ts"
import type { NadConfigs } from "../services/NadConfigs.ts"
import type { Pods } from "../services/Pods.ts"
import type { Reservations } from "../services/Reservations.ts"
import { apiError, execute } from "./executor.ts"
import { cachedPodsIn, recheckHoldings } from "./recheck.ts"
import { cacheSnapshot, cachedListedBy, claimSource } from "./snapshot.ts"

export type FreeRequirements = Caches | NadConfigs | EventRecorder | IPPoolStore | Reservations | Pods | ControllerConfig | Metrics

export interface PodResult {
  readonly outcome: Outcome
  /** Whereabouts networks of the pod where the snapshot showed none of its entries (PodFindings.unseen). */
  readonly unseen: ReadonlyArray<string>
  /** The other pods rule 0 kept some of its addresses for: it is worth another look once they are gone. */
  readonly heldFor: ReadonlyArray<string>
}

/** A pod to release: deleted, or still there but never to run again (why, as the caches saw it; the live re-check decides). */
export type Candidate = (
  /** foundBy "sweep": an orphan a sweep kept for another pod (rule 0), handed to the loop; uid unknown. */
  | { readonly claim: "Deleted"; readonly pod: PodProjection; readonly foundBy?: "sweep" }
  | { readonly claim: "NeverRunsAgain"; readonly pod: PodProjection; readonly reason: NeverRunsAgainReason }
) & {
  /** Queued again for its unseen networks (deletion-loop.ts): a candidate is looked at again once. */
  readonly lookingAgain?: boolean
}

/**
 * What each podref of the batch holds, incarnations of one pod merged. A deleted incarnation
 * makes the podref a deletion: then a live namesake keeps everything, whatever its state.
 */
const findAll = (batch: ReadonlyArray<Candidate>, snapshot: Snapshot) =>
  [...Map.groupBy(batch, (c) => podRef(c.pod)).values()].map((incarnations) => ({
    findings: incarnations.map((c) => findPodHoldings(c.pod, snapshot)).reduce((a, b) => mergeFindings(a, b)),
    candidate: incarnations.find((c) => c.claim === "Deleted") ?? incarnations.at(-1)!
  }))

const claimOf = (c: Candidate): Pick<Holding, "claim" | "trigger"> =>
  c.claim === "Deleted" ? { claim: "Deleted", trigger: c.foundBy ?? "deletion" } : { claim: "NeverRunsAgain", trigger: c.reason }

/** Pools read live (the cache may not have seen them yet); one that does not exist is in neither map: it holds nothing. */
export const readLivePools = (names: ReadonlySet<string>) =>
  Effect.gen(function* () {
    const store = yield* IPPoolStore
    const pools = new Map<string, ParsedPool>()
    const errors = new Map<string, KubeError>()
    for (const name of names) {
      const read = yield* Effect.either(store.get(name))
      if (Either.isRight(read)) pools.set(name, read.right.pool)
      else if (read.left.reason !== "NotFound") errors.set(name, read.left)
    }
    return { pools, errors }
  })

/** The holdings of the batch: findings, with the live reads they need, as holdings (failed where a read failed). */
const holdingsOf = (batch: ReadonlyArray<Candidate>, snapshot: Snapshot) =>
  Effect.gen(function* () {
    const found = findAll(batch, snapshot)
    const reads = new Set(found.flatMap(({ findings: f }) => [...f.liveReads.keys()]))
    const { pools, errors } = yield* readLivePools(reads)
    const holdings = found.map(({ findings: f, candidate }): Holding => {
      const failedRead = [...f.liveReads.keys()].map((name) => errors.get(name)).find((e) => e !== undefined)
      const holding = deletedPodHolding(f, pools, snapshot, claimOf(candidate))
      return failedRead === undefined ? holding : { ...holding, error: apiError(f.ref, failedRead) }
    })
    return { holdings, unseen: new Map(found.map(({ findings: f }) => [f.ref, unseenAfterReads(f, pools)])) }
  })

/**
 * Frees what a batch of pods held. Never fails as a whole: each pod gets its own outcome, so
 * one bad annotation or a failed write for one pool does not hold back the others.
 */
export const freeBatch = (batch: ReadonlyArray<Candidate>): Effect.Effect<ReadonlyArray<PodResult>, never, FreeRequirements> =>
  Effect.gen(function* () {
    const snapshot = yield* cacheSnapshot
    const caches = yield* Caches
    const found = yield* holdingsOf(batch, snapshot)
    // Rule 0 reads the NADs and node slices as they are after holdingsOf's live reads: a snapshot of its own.
    const claims = claimSource(cachedListedBy(caches), yield* cacheSnapshot)
    const { holdings, facts } = yield* recheckHoldings(found.holdings, cachedPodsIn(caches), claims)
    const plan = planRelease(holdings, facts)
    const execution = yield* execute(plan)
    const heldFor = new Map(plan.owners.map((o) => [o.holding.podref, [...new Set(o.kept.flatMap((k) => k.heldFor ?? []))]] as const))
    // Incarnations of one pod shared one holding: what it freed is reported once, not once per incarnation.
    const reported = new Set<string>()
    return batch.map(({ pod }): PodResult => {
      const ref = podRef(pod)
      const outcome = execution.outcomes.get(ref) ?? Outcome.Freed({ freed: [], reservations: 0 })
      const twin = reported.has(ref) && outcome._tag === "Freed"
      reported.add(ref)
      return { outcome: twin ? Outcome.Freed({ freed: [], reservations: 0 }) : outcome, unseen: found.unseen.get(ref) ?? [], heldFor: heldFor.get(ref) ?? [] }
    })
  })
