/**
 * The invariants (src/domain/invariants.ts) as the programs judge them, never repairing (docs/runbooks.md).
 *
 * The monitor, as the leader runs it: every --invariant-interval and after each sweep, on the caches
 * alone. A violation seen for --invariant-grace (caches lag, an ADD or a free is half-written for a
 * moment) is reported once: its gauge, a Warning Event on each pod and a log line; a line again when it clears.
 *
 * `audit`, once, on its fresh listing. With no memory of how long a disagreement has lasted, a violation
 * counts only when every pod it involves, read live, is still that Running pod and was Ready
 * --invariant-grace before the listing began (its ADD done before any of it was read). A pod without a
 * Ready condition is not judged. What is left out is counted.
 */
import { Clock, Context, Duration, Effect, Either, Schedule } from "effect"
import { type InvariantViolation, type PodIdentity, VIOLATION_REASON, countByKind, invariantViolations, judged, makeEntryLookup, violationsPausing } from "../domain/invariants.ts"
import { formatIP } from "../domain/ip.ts"
import { isRecord, list, record } from "../domain/json.ts"
import { type PodProjection, podRef, projectPod } from "../domain/pod.ts"
import { Caches } from "../services/Caches.ts"
import { changeStamp } from "../services/Informer.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { EventRecorder } from "../services/EventRecorder.ts"
import { KubeApi, type KubeObject } from "../services/KubeApi.ts"
import { Metrics } from "../services/Metrics.ts"
import { NadConfigs } from "../services/NadConfigs.ts"
import * as R from "../services/resources.ts"
import { cacheSnapshot, cachedListedBy, invariantView } from "./snapshot.ts"
import type { World } from "./sweep.ts"

const violationAnnotations = (v: InvariantViolation) => ({
  kind: v.kind,
  ip: formatIP(v.ip),
  pods: v.pods.map(podRef).join(","),
  pools: v.pools.join(","),
  ...(v.reservation === undefined ? {} : { reservation: v.reservation }),
  ...(v.holder === undefined ? {} : { heldFor: v.holder })
})

interface Tracked {
  readonly violation: InvariantViolation
  readonly since: number
  reported: boolean
}

/**
 * Pods judged between two turns of the event loop: an evaluation over every pod of a large cluster
 * would otherwise hold up the deletion path (its watch events, its writes) for as long as it takes.
 */
export const PODS_PER_TURN = 2_000

/** The event loop's next turn (after pending I/O and timers), as an effect. */
const nextTurn = Effect.async<void>((resume) => {
  const t = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(t))
})

/** Runs `steps` to its result, giving the event loop a turn at each pause. */
export const betweenTurns = <A>(steps: Generator<void, A>): Effect.Effect<A> =>
  Effect.suspend(function step(): Effect.Effect<A> {
    const next = steps.next()
    return next.done === true ? Effect.succeed(next.value) : Effect.zipRight(nextTurn, Effect.suspend(step))
  })

/** A monitor with its own memory of what it has seen since when, and what it has reported. */
export const makeInvariantMonitor = Effect.gen(function* () {
  const { invariantInterval, invariantGrace } = yield* ControllerConfig
  const metrics = yield* Metrics
  const events = yield* EventRecorder
  const graceMillis = Duration.toMillis(invariantGrace)
  const entryAt = makeEntryLookup()
  const tracked = new Map<string, Tracked>()
  const lock = yield* Effect.makeSemaphore(1)
  const context = yield* Effect.context<Caches | NadConfigs>()
  const caches = Context.get(context, Caches)
  // The caches as the invariants' view (read at once: it follows the informers).
  const view = Effect.map(cacheSnapshot, (snapshot) =>
    invariantView({ pods: caches.pods.byKey, listedBy: cachedListedBy(caches) }, caches.pools.values().map((p) => p.pool), snapshot, entryAt)
  )

  const report = (v: InvariantViolation) =>
    Effect.zipRight(
      Effect.logWarning(`invariant violated: ${v.message}`).pipe(Effect.annotateLogs(violationAnnotations(v))),
      Effect.forEach(v.pods, (p) => events.record({ kind: "Pod", ...p }, "Warning", VIOLATION_REASON[v.kind], v.message), { discard: true })
    )

  const judge = (found: ReadonlyArray<InvariantViolation>, now: number) => {
    const seen = new Set<string>()
    const due: Array<InvariantViolation> = []
    for (const v of found) {
      seen.add(v.id)
      let t = tracked.get(v.id)
      if (t === undefined) tracked.set(v.id, (t = { violation: v, since: now, reported: false }))
      if (!t.reported && now - t.since >= graceMillis) {
        t.reported = true
        due.push(v)
      }
    }
    const cleared: Array<InvariantViolation> = []
    for (const [id, t] of tracked) {
      if (seen.has(id)) continue
      tracked.delete(id)
      if (t.reported) cleared.push(t.violation)
    }
    return { due, cleared }
  }

  // The violations are a function of the caches alone: while none has changed, the last ones stand
  // and only their time since is new (an idle cluster costs no evaluation).
  const stampOf = () => changeStamp([caches.pods, caches.pools, caches.reservations, caches.nads, caches.nodeSlicePools])
  let last: { readonly stamp: string; readonly found: ReadonlyArray<InvariantViolation> } | undefined

  const evaluate = lock.withPermits(1)(
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const stamp = stampOf()
      const found = last?.stamp === stamp ? last.found : yield* betweenTurns(violationsPausing(yield* Effect.provide(view, context), PODS_PER_TURN))
      last = { stamp, found }
      const { due, cleared } = judge(found, now)
      for (const v of cleared) yield* Effect.logInfo(`invariant violation cleared: ${v.message}`).pipe(Effect.annotateLogs(violationAnnotations(v)))
      yield* Effect.forEach(due, report, { discard: true })
      yield* metrics.invariantViolations(countByKind([...tracked.values()].filter((t) => t.reported).map((t) => t.violation)))
    })
  )

  // `evaluate`: one evaluation (never overlapping another); `run`: now and every --invariant-interval, until interrupted.
  return { evaluate, run: Effect.asVoid(Effect.repeat(evaluate, Schedule.spaced(invariantInterval))) }
})

export interface AuditedInvariants {
  readonly violations: ReadonlyArray<InvariantViolation>
  /** Violations the listing shows whose pods are not Ready for long enough (or changed since): not counted. */
  readonly notJudged: number
}

/** When a pod object's Ready condition turned True (ms since the epoch); undefined when it is not Ready. */
const readySince = (o: KubeObject): number | undefined => {
  const status = record(o["status"])
  const ready = list(status["conditions"]).find((c) => isRecord(c) && c["type"] === "Ready" && c["status"] === "True")
  const since = isRecord(ready) && typeof ready["lastTransitionTime"] === "string" ? Date.parse(ready["lastTransitionTime"]) : Number.NaN
  return Number.isNaN(since) ? undefined : since
}

/** Whether the pod, read live, is still this Running pod and has been Ready since `before`. */
const settled = (pod: PodIdentity, before: number) =>
  Effect.flatMap(KubeApi, (api) =>
    Effect.map(Effect.either(api.get(R.Pods, pod.namespace, pod.name)), (read) => {
      if (Either.isLeft(read)) return false
      const live: PodProjection = projectPod(read.right)
      const since = readySince(read.right)
      return live.uid === pod.uid && judged(live) && since !== undefined && since <= before
    })
  )

/** The violations of a sweep's listing whose pods are settled; `startedAt` when the listing began. */
export const auditInvariants = (world: World, startedAt: number) =>
  Effect.gen(function* () {
    const { invariantGrace } = yield* ControllerConfig
    const found = invariantViolations(invariantView(world, [...world.pools.values()], world.snapshot, makeEntryLookup()))
    const before = startedAt - Duration.toMillis(invariantGrace)
    // Each pod read once, however many violations involve it.
    const refs = [...new Map(found.flatMap((v) => v.pods).map((p) => [`${p.namespace}/${p.name}@${p.uid}`, p] as const))]
    const verdicts = new Map(yield* Effect.forEach(refs, ([key, p]) => Effect.map(settled(p, before), (ok) => [key, ok] as const), { concurrency: 8 }))
    const violations = found.filter((v) => v.pods.every((p) => verdicts.get(`${p.namespace}/${p.name}@${p.uid}`) === true))
    return { violations, notJudged: found.length - violations.length } satisfies AuditedInvariants
  })
