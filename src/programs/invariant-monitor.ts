/**
 * The invariant monitor (src/domain/invariants.ts) as the leader runs it: every --invariant-interval
 * and after each sweep, on the caches alone. A violation seen for --invariant-grace (caches lag, an
 * ADD or a free is half-written for a moment) is reported once: its gauge, a Warning Event on each
 * pod and a log line; a line again when it clears. It never repairs (docs/runbooks.md).
 */
import { Clock, Context, Duration, Effect, Option, Schedule } from "effect"
import { type EntryLookup, type InvariantView, type InvariantViolation, VIOLATION_REASON, countByKind, invariantViolations, makeEntryLookup } from "../domain/invariants.ts"
import { formatIP } from "../domain/ip.ts"
import { podRef } from "../domain/pod.ts"
import { Caches } from "../services/Caches.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { EventRecorder } from "../services/EventRecorder.ts"
import { Metrics } from "../services/Metrics.ts"
import { NadConfigs } from "../services/NadConfigs.ts"
import { cacheSnapshot, cachedListedBy, invariantView } from "./snapshot.ts"

/** The caches as the invariants' view (read it at once: it follows the informers). */
export const cacheInvariantView = (entryAt: EntryLookup): Effect.Effect<InvariantView, never, Caches | NadConfigs> =>
  Effect.gen(function* () {
    const caches = yield* Caches
    const given = {
      pods: caches.pods.values(),
      listedBy: cachedListedBy(caches),
      pod: (ref: string) => Option.getOrUndefined(caches.pods.get(ref)),
      pools: caches.pools.values().map((p) => p.pool),
      entryAt
    }
    return invariantView(given, yield* cacheSnapshot)
  })

/** What a log line says of a violation, beside its message. */
export const violationAnnotations = (v: InvariantViolation) => ({
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

/** A monitor with its own memory of what it has seen since when, and what it has reported. */
export const makeInvariantMonitor = Effect.gen(function* () {
  const { invariantInterval, invariantGrace } = yield* ControllerConfig
  const metrics = yield* Metrics
  const events = yield* EventRecorder
  const graceMillis = Duration.toMillis(invariantGrace)
  const entryAt = makeEntryLookup()
  const tracked = new Map<string, Tracked>()
  const lock = yield* Effect.makeSemaphore(1)
  const caches = yield* Effect.context<Caches | NadConfigs>()

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
  const { pods, pools, reservations, nads, nodeSlicePools } = Context.get(caches, Caches)
  const stampOf = () => [pods, pools, reservations, nads, nodeSlicePools].map((i) => i.changes()).join(",")
  let last: { readonly stamp: string; readonly found: ReadonlyArray<InvariantViolation> } | undefined

  const evaluate = lock.withPermits(1)(
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const stamp = stampOf()
      const found = last?.stamp === stamp ? last.found : invariantViolations(yield* Effect.provide(cacheInvariantView(entryAt), caches))
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
