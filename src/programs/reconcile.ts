/**
 * The deletion path: for a batch of deleted pods, find what each held (caches first, pools the
 * cache has not seen read live), re-check live that no pod of the same name exists, plan the
 * release and carry it out (src/domain/release.ts, executor.ts).
 *
 * A mass deletion becomes one patch per pool instead of one per pod, and the re-check one LIST
 * per namespace instead of one GET per pod (recheck.ts).
 */
import { Effect, Either } from "effect"
import { type PodFindings, type Snapshot, deletedPodHolding, findPodHoldings, mergeFindings } from "../domain/holdings.ts"
import { type PodProjection, podRef } from "../domain/pod.ts"
import type { ParsedPool } from "../domain/pool.ts"
import { type Holding, type LivePods, Outcome, type ReleaseError, planRelease, recheckTargets } from "../domain/release.ts"
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
import { cachedPodsIn, livePodsByRef } from "./recheck.ts"
import { cacheSnapshot } from "./snapshot.ts"

export { Outcome }

/** The services a reconcile reads and writes through. */
export type ReconcileRequirements = Caches | NadConfigs | EventRecorder | IPPoolStore | Reservations | Pods | ControllerConfig | Metrics

export interface PodResult {
  readonly pod: PodProjection
  readonly outcome: Outcome
}

export interface BatchOutcome {
  readonly results: ReadonlyArray<PodResult>
  /**
   * Writes the Events of what was freed (and the Warnings) and counts it. Not yet run: the
   * addresses are free already, so the deletion loop writes them in the background and its
   * worker takes the next batch; `reconcilePods` runs it before returning.
   */
  readonly events: Effect.Effect<void>
}

/** What each podref of the batch holds, incarnations of one pod merged. */
const findAll = (batch: ReadonlyArray<PodProjection>, snapshot: Snapshot): Map<string, PodFindings> => {
  const out = new Map<string, PodFindings>()
  for (const pod of batch) {
    const found = findPodHoldings(pod, snapshot)
    const same = out.get(found.ref)
    out.set(found.ref, same === undefined ? found : mergeFindings(same, found))
  }
  return out
}

/** Pools the cache has not seen yet (a pool event may still be on its way), read live; one that does not exist holds nothing. */
const readLivePools = (names: ReadonlySet<string>) =>
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
const holdingsOf = (batch: ReadonlyArray<PodProjection>, snapshot: Snapshot) =>
  Effect.gen(function* () {
    const findings = findAll(batch, snapshot)
    const reads = new Set([...findings.values()].flatMap((f) => (f.error === undefined ? [...f.liveReads.keys()] : [])))
    const { pools, errors } = yield* readLivePools(reads)
    return [...findings.values()].map((f): Holding => {
      const failedRead = [...f.liveReads.keys()].map((name) => errors.get(name)).find((e) => e !== undefined)
      const holding = deletedPodHolding(f, pools, snapshot)
      return failedRead === undefined || holding.error !== undefined ? holding : { ...holding, error: apiError(f.ref, failedRead) }
    })
  })

/**
 * Whether a pod of each name exists now. Existence is all a deletion asks (a namesake keeps
 * everything), so metadata only. A failed re-check fails every holding it was for.
 */
const recheck = (holdings: ReadonlyArray<Holding>) =>
  Effect.gen(function* () {
    const caches = yield* Caches
    const targets = recheckTargets(holdings)
    const live = yield* Effect.either(livePodsByRef(targets.flatMap((h) => h.pod ?? []), { metadataOnly: true }, cachedPodsIn(caches)))
    if (Either.isRight(live)) return { holdings, live: live.right }
    const failed = new Set(targets.map((h) => h.podref))
    return {
      holdings: holdings.map((h) => (failed.has(h.podref) ? { ...h, error: apiError(h.podref, live.left) } : h)),
      live: new Map() as LivePods
    }
  })

/**
 * Reconciles a batch of deleted pods. Never fails as a whole: each pod gets its own outcome, so
 * one bad annotation or a failed write for one pool does not hold back the others.
 */
export const reconcileBatch = (batch: ReadonlyArray<PodProjection>): Effect.Effect<BatchOutcome, never, ReconcileRequirements> =>
  Effect.gen(function* () {
    const snapshot = yield* cacheSnapshot
    const { holdings, live } = yield* recheck(yield* holdingsOf(batch, snapshot))
    const execution = yield* execute(planRelease(holdings, live))
    // Incarnations of one pod shared one holding: what it freed is reported once, not once per incarnation.
    const reported = new Set<string>()
    const results = batch.map((pod): PodResult => {
      const ref = podRef(pod)
      const outcome = execution.outcomes.get(ref) ?? Outcome.Freed({ freed: [], reservations: 0 })
      const twin = reported.has(ref) && outcome._tag === "Freed"
      reported.add(ref)
      return { pod, outcome: twin ? Outcome.Freed({ freed: [], reservations: 0 }) : outcome }
    })
    return { results, events: execution.finish }
  })

/** `reconcileBatch` with its Events written before it returns. */
export const reconcilePods = (batch: ReadonlyArray<PodProjection>) => Effect.flatMap(reconcileBatch(batch), ({ events, results }) => Effect.as(events, results))

/** One deleted pod, as a typed Effect: its outcome, or a ReleaseError when nothing could be freed. Its Events are written. */
export const reconcilePod = (pod: PodProjection): Effect.Effect<Exclude<Outcome, { readonly _tag: "Failed" }>, ReleaseError, ReconcileRequirements> =>
  Effect.flatMap(reconcilePods([pod]), ([r]) => {
    if (r === undefined) return Effect.die("empty batch")
    return r.outcome._tag === "Failed" ? Effect.fail(r.outcome.error) : Effect.succeed(r.outcome)
  })
