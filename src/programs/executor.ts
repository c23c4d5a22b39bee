/**
 * The executor: carries out a ReleasePlan (src/domain/release.ts) for every path in the order its rules
 * demand: reservations, one guarded patch per pool, reservations given back to reborn pods; then the
 * Events of what was done (queued: freeing never waits for them) and the metrics. The only module that
 * calls the pool store's release.
 */
import { Effect, Either } from "effect"
import { type EventIntent, REASON_BAD_ANNOTATION, REASON_BAD_CONFIG, podObject } from "../domain/events.ts"
import { formatIP } from "../domain/ip.ts"
import {
  type FreeTrigger,
  type FreedIP,
  Outcome,
  type OwnerPlan,
  type PlannedEntry,
  ReleaseError,
  type ReleasePlan,
  entriesByPool
} from "../domain/release.ts"
import { EventRecorder } from "../services/EventRecorder.ts"
import { IPPoolStore } from "../services/IPPoolStore.ts"
import { type KubeError, isRetryableKubeError } from "../services/KubeError.ts"
import { Metrics } from "../services/Metrics.ts"
import { Reservations } from "../services/Reservations.ts"

/** Owners whose reservations are deleted at once (each owner's one after another). */
export const RESERVATION_CONCURRENCY = 16
export const POOL_CONCURRENCY = 4
const EVENT_CONCURRENCY = 16

/** A KubeError as the error of the candidate it stopped. */
export const apiError = (pod: string, e: KubeError): ReleaseError =>
  new ReleaseError({ reason: "ApiError", pod, retryable: isRetryableKubeError(e), detail: e.message, cause: e })

interface ReservationsDone {
  readonly deleted: ReadonlySet<string>
  /** Changed since they were seen (re-created for someone else): left alone. */
  readonly reassigned: ReadonlySet<string>
  readonly error: ReleaseError | undefined
}

/** Deletes an owner's reservations one after another; stops at the first failure. */
const deleteReservationsOf = (plan: OwnerPlan) =>
  Effect.gen(function* () {
    const reservations = yield* Reservations
    const deleted = new Set<string>()
    const reassigned = new Set<string>()
    for (const r of plan.reservations) {
      const outcome = yield* Effect.either(r.listed === undefined ? reservations.deleteFor(r.name, plan.holding.podref) : reservations.deleteListed(r.listed))
      if (Either.isLeft(outcome)) return { deleted, reassigned, error: apiError(plan.holding.podref, outcome.left) } satisfies ReservationsDone
      if (outcome.right === "deleted") deleted.add(r.name)
      else if (outcome.right === "reassigned") reassigned.add(r.name)
    }
    return { deleted, reassigned, error: undefined } satisfies ReservationsDone
  })

interface PoolsDone {
  readonly released: ReadonlyArray<PlannedEntry>
  /** Changed or gone under us: not freed. */
  readonly skipped: ReadonlyArray<PlannedEntry>
  /** Entries of pools whose patch failed, with the failure. */
  readonly failed: ReadonlyArray<{ readonly entry: PlannedEntry; readonly error: KubeError }>
}

const releasePool = (pool: string, planned: ReadonlyArray<PlannedEntry>) =>
  Effect.gen(function* () {
    const store = yield* IPPoolStore
    const byKey = new Map(planned.map((p) => [p.held.entry.key, p] as const))
    const out = yield* Effect.either(store.release(pool, planned.map((p) => p.held.entry)))
    if (Either.isLeft(out)) return { released: [], skipped: [], failed: planned.map((entry) => ({ entry, error: out.left })) } satisfies PoolsDone
    const back = (keys: ReadonlyArray<{ readonly key: string }>) => keys.flatMap((e) => byKey.get(e.key) ?? [])
    return { released: back(out.right.released), skipped: back(out.right.skipped), failed: [] } satisfies PoolsDone
  })

/** One guarded patch per pool (several for a pool with thousands of entries), a few pools at once. */
const releasePools = (entries: Iterable<PlannedEntry>) =>
  Effect.map(
    Effect.forEach([...entriesByPool(entries)], ([pool, planned]) => releasePool(pool, planned), { concurrency: POOL_CONCURRENCY }),
    (done): PoolsDone => ({
      released: done.flatMap((d) => d.released),
      skipped: done.flatMap((d) => d.skipped),
      failed: done.flatMap((d) => d.failed)
    })
  )

/**
 * An entry meant to be freed that now has the same podref under another id was taken back by a reborn
 * pod (its re-ADD leaves the reservation as it found it): give back the reservation deleted before the
 * release, best effort (until then the reborn pod is without it). Answers the names given back.
 */
const restoreReservations = (pool: string, entries: ReadonlyArray<PlannedEntry>, deletedFor: (owner: string) => ReadonlySet<string> | undefined) =>
  Effect.gen(function* () {
    const store = yield* IPPoolStore
    const reservations = yield* Reservations
    const current = yield* store.get(pool)
    const restored: Array<string> = []
    for (const { owner, held } of entries) {
      const now = current.pool.entries.find((e) => e.key === held.entry.key)
      // Still the dead pod's (same id), someone else's, or gone: nothing to give back.
      if (now === undefined || now.podref !== held.entry.podref || now.id === held.entry.id) continue
      const name = held.reservation
      if (name === undefined || deletedFor(owner)?.has(name) !== true) continue
      yield* reservations.restore(name, { podref: now.podref, ...(now.ifname === undefined ? {} : { ifname: now.ifname }) })
      restored.push(name)
    }
    return restored
  }).pipe(
    Effect.catchAll((e) =>
      Effect.logWarning("could not restore the reservation of an address a reborn pod took back").pipe(
        Effect.annotateLogs({ pool, error: e.message }),
        Effect.as<ReadonlyArray<string>>([])
      )
    )
  )

/** How the plan went for each owner, and what it counted. */
export interface Execution {
  readonly outcomes: ReadonlyMap<string, Outcome>
  readonly counts: { readonly freed: number; readonly reservationsDeleted: number; readonly spared: number }
  /** What the guarded patches removed, and what they skipped (changed or gone under us), entry by entry. */
  readonly released: ReadonlyArray<PlannedEntry>
  readonly skipped: ReadonlyArray<PlannedEntry>
  /** Per owner that got that far, what deleting its reservations did. */
  readonly reservations: ReadonlyMap<string, ReservationsDone>
  /** Reservations deleted, then given back because a pod reborn under the name took the address back. */
  readonly restored: ReadonlySet<string>
}

const freedIP = (p: PlannedEntry): FreedIP => ({ ip: formatIP(p.held.entry.ip), pool: p.held.pool, network: p.held.network })

const outcomeOf = (plan: OwnerPlan, reservations: ReservationsDone | undefined, released: ReadonlyArray<PlannedEntry>, poolError: ReleaseError | undefined): Outcome => {
  switch (plan.decision) {
    case "failed":
      return Outcome.Failed({ error: plan.holding.error! })
    case "nothing":
      return Outcome.Freed({ freed: [], reservations: 0 })
    case "kept":
      return Outcome.Kept({ why: plan.kept[0]?.why ?? "nothing to free" })
    case "release": {
      const freed = released.map(freedIP)
      const deleted = reservations?.deleted.size ?? 0
      const error = reservations?.error ?? poolError
      if (error === undefined) return Outcome.Freed({ freed, reservations: deleted })
      return freed.length > 0 ? Outcome.PartlyFreed({ freed, reservations: deleted, error }) : Outcome.Failed({ error })
    }
  }
}

/** What became of a pod's addresses, after a Warning about bad input met finding them. */
const despite = (plan: OwnerPlan, freed: number, outcome: Outcome | undefined): string => {
  if (freed > 0) return `freed its ${freed} address${freed === 1 ? "" : "es"} found by podref`
  if (outcome?._tag === "Failed") return "freeing its addresses failed (retried)"
  if (plan.decision === "kept") return "a pod of that name holds its addresses: none freed"
  return "no address of it found by podref"
}

/** The Events of one owner: Warnings about its bad input, and for what was freed its Normal Events (and the Warnings that wait for a free). */
const eventsOf = (plan: OwnerPlan, released: ReadonlyArray<PlannedEntry>, outcome: Outcome | undefined): ReadonlyArray<EventIntent> => {
  const pod = plan.holding.pod
  const problems = pod === undefined ? [] : plan.holding.problems.map((p): EventIntent => ({
    regarding: podObject(pod),
    type: "Warning",
    reason: p.reason === "BadAnnotation" ? REASON_BAD_ANNOTATION : REASON_BAD_CONFIG,
    message: `${p.text}; ${despite(plan, released.length, outcome)}`
  }))
  return [...problems, ...(released.length > 0 ? plan.holding.ifFreed : []), ...released.flatMap((p) => p.event ?? [])]
}

/** Records the Events of what was done, then counts it in the metrics (so `ips_freed_total` moves only once its Events are queued). */
const recordDone = (plan: ReleasePlan, released: ReadonlyMap<string, ReadonlyArray<PlannedEntry>>, outcomes: ReadonlyMap<string, Outcome>) =>
  Effect.gen(function* () {
    const events = yield* EventRecorder
    const metrics = yield* Metrics
    const intents = (o: OwnerPlan) => eventsOf(o, released.get(o.holding.podref) ?? [], outcomes.get(o.holding.podref))
    yield* Effect.forEach(plan.owners, (o) => Effect.forEach(intents(o), (e) => events.record(e.regarding, e.type, e.reason, e.message), { discard: true }), {
      concurrency: EVENT_CONCURRENCY,
      discard: true
    })
    for (const o of plan.owners) for (const p of o.holding.problems) yield* metrics.failure(p.reason)
    const totals = new Map<FreeTrigger, { freed: number; reservations: number }>()
    for (const o of plan.owners) {
      const outcome = outcomes.get(o.holding.podref)
      if (outcome === undefined || (outcome._tag !== "Freed" && outcome._tag !== "PartlyFreed")) continue
      const t = totals.get(o.trigger) ?? { freed: 0, reservations: 0 }
      totals.set(o.trigger, { freed: t.freed + outcome.freed.length, reservations: t.reservations + outcome.reservations })
    }
    for (const [trigger, t] of totals) {
      if (t.freed > 0) yield* metrics.ipsFreed(trigger, t.freed)
      if (t.reservations > 0) yield* metrics.reservationsDeleted(trigger, t.reservations)
    }
  })

/** One line per entry or reservation rule 0 kept, naming it, its podref and the pod that lists its address. */
const logHeldForAnother = (plan: ReleasePlan) =>
  Effect.forEach(
    plan.owners.flatMap((o) => o.kept.flatMap((k) => (k.heldFor === undefined ? [] : [{ owner: o.holding.podref, k }]))),
    ({ owner, k }) => Effect.logWarning("kept an address another live pod lists: held for another").pipe(Effect.annotateLogs({ what: k.what, podref: owner, listedBy: k.heldFor ?? "" })),
    { discard: true }
  )

/** Carries out the plan; never fails as a whole: each owner gets its outcome. */
export const execute = (plan: ReleasePlan): Effect.Effect<Execution, never, IPPoolStore | Reservations | EventRecorder | Metrics> =>
  Effect.gen(function* () {
    yield* logHeldForAnother(plan)
    const releasing = plan.owners.filter((o) => o.decision === "release")
    // Reservations first, while the pool still holds their entries (rule 4); an owner whose delete failed keeps its entries for the retry.
    const reservations = new Map<string, ReservationsDone>()
    yield* Effect.forEach(releasing, (o) => Effect.map(deleteReservationsOf(o), (done) => void reservations.set(o.holding.podref, done)), {
      concurrency: RESERVATION_CONCURRENCY,
      discard: true
    })
    const ready = releasing.filter((o) => reservations.get(o.holding.podref)?.error === undefined)
    const pools = yield* releasePools(ready.flatMap((o) => o.entries))
    // Rule 5: give back what a reborn pod took back, for skipped entries and those of failed pools (the retry will find the pod alive).
    const deletedFor = (owner: string) => reservations.get(owner)?.deleted
    const toRestore = [...pools.skipped, ...pools.failed.map((f) => f.entry)]
    const restored = new Set<string>()
    for (const [pool, entries] of Map.groupBy(toRestore, (p) => p.held.pool)) for (const name of yield* restoreReservations(pool, entries, deletedFor)) restored.add(name)

    const released = Map.groupBy(pools.released, (p) => p.owner)
    const poolErrors = new Map<string, ReleaseError>()
    for (const f of pools.failed) if (!poolErrors.has(f.entry.owner)) poolErrors.set(f.entry.owner, apiError(f.entry.owner, f.error))
    const outcomes = new Map<string, Outcome>()
    for (const o of plan.owners) {
      const ref = o.holding.podref
      outcomes.set(ref, outcomeOf(o, reservations.get(ref), released.get(ref) ?? [], poolErrors.get(ref)))
    }
    const doneReservations = [...reservations.values()]
    const counts = {
      freed: pools.released.length,
      reservationsDeleted: doneReservations.reduce((n, r) => n + r.deleted.size, 0),
      spared: plan.owners.reduce((n, o) => n + o.kept.length, 0) + pools.skipped.length + doneReservations.reduce((n, r) => n + r.reassigned.size, 0)
    }
    yield* recordDone(plan, released, outcomes)
    return { outcomes, counts, released: pools.released, skipped: pools.skipped, reservations, restored } satisfies Execution
  })
