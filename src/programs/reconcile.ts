/**
 * Reconcile deleted pods: find every whereabouts allocation they held, make sure no live pod
 * of the same name holds them, delete their overlapping-range reservations, free them with one
 * guarded patch per pool and report each freed IP as an Event.
 *
 * Pods are reconciled in batches (one pod is a batch of one): a mass deletion becomes one
 * patch per pool instead of one per pod, and the same-name re-check becomes one LIST per
 * namespace instead of one GET per pod.
 */
import { Data, Effect, Either, Option } from "effect"
import { formatIP } from "../domain/ip.ts"
import { IpamConfigError } from "../domain/ipam-config.ts"
import { type AnnotationError } from "../domain/multus.ts"
import { type PodProjection, podAttachments, podRef } from "../domain/pod.ts"
import { type PoolEntry, poolName, poolNetworkName, reservationName } from "../domain/pool.ts"
import { Caches, PODREF_INDEX, type PoolRecord } from "../services/Caches.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import {
  EventRecorder,
  REASON_BAD_ANNOTATION,
  REASON_BAD_CONFIG,
  REASON_GARBAGE_COLLECTED,
  REASON_NAD_MISSING,
  garbageCollectedMessage
} from "../services/EventRecorder.ts"
import { IPPoolStore, type ReleaseEntry } from "../services/IPPoolStore.ts"
import type { ReadOptions } from "../services/KubeApi.ts"
import { type KubeError, isRetryableKubeError } from "../services/KubeError.ts"
import { NadConfigs } from "../services/NadConfigs.ts"
import { Pods } from "../services/Pods.ts"
import { Reservations } from "../services/Reservations.ts"

export type ReconcileErrorReason = "ApiError" | "BadAnnotation" | "BadNadConfig"

export class ReconcileError extends Data.TaggedError("ReconcileError")<{
  readonly reason: ReconcileErrorReason
  readonly pod: string
  readonly retryable: boolean
  readonly detail: string
  readonly cause?: KubeError | AnnotationError | IpamConfigError | undefined
}> {
  override get message(): string {
    return `pod ${this.pod}: ${this.reason}: ${this.detail}`
  }
}

export interface FreedIP {
  readonly ip: string
  readonly pool: string
  /** What the Event names: the NAD's name, or the pool's network when no NAD maps to the pool. */
  readonly network: string
}

export type Outcome =
  | {
      readonly _tag: "Freed"
      readonly freed: ReadonlyArray<FreedIP>
      readonly reservations: number
      /** A reservation delete that failed after the pool entries were freed: retry the pod for it. */
      readonly pending?: ReconcileError
    }
  | { readonly _tag: "Kept"; readonly why: string }

export interface PodResult {
  readonly pod: PodProjection
  readonly result: Either.Either<Outcome, ReconcileError>
}

/** Reservation deletes in flight at once; a batch with no more than this frees pools and reservations together. */
export const RESERVATION_CONCURRENCY = 16

/**
 * Above this many pods, the same-name re-check lists namespaces instead of getting pods: a LIST
 * costs one request of the client's budget but the server reads the whole namespace. GETs are
 * kept while they cost at most 1/16 s of that budget (`apiQps / 16`), and never fewer than 8 or
 * more than 32: at the default QPS 20 that is 8; at QPS 500, 31 (measured on the real API server,
 * single deletions at 50/s: a LIST of a 1,000-pod namespace whenever a backlog made a batch of 9
 * took 150 ms and doubled the p99; BENCHMARKS.md).
 */
export const listRecheckThreshold = (apiQps: number): number => Math.min(32, Math.max(8, Math.floor(apiQps / 16)))

/**
 * How many pods a LIST reads, at most, for each re-checked pod before GETs are the cheaper choice
 * for the server: a LIST reads and sends the whole namespace (a GET one pod), and in a namespace
 * of thousands, lists for batches of ten made the API server the bottleneck (a deletion a second
 * from a 10k-pod namespace: every backlog over 8 listed all 10k pods, 20 pages at a time, and
 * batches took ~28 s; bench/rss-probe.ts with PROBE_CHURN).
 */
export const LIST_READS_PER_POD = 16

/**
 * Whether the re-check of `refs` pods of one namespace lists it instead of getting each pod: only
 * above `listRecheckThreshold`, and then when the namespace is small for the batch (at most
 * LIST_READS_PER_POD cached pods per re-checked pod) or the GETs would take more than two
 * seconds of the client's budget (`2 × apiQps`), whatever the namespace's size.
 */
export const recheckByList = (refs: number, namespacePods: number, apiQps: number): boolean =>
  refs > listRecheckThreshold(apiQps) && (refs * LIST_READS_PER_POD >= namespacePods || refs > 2 * apiQps)

/** Re-check GETs in flight at once. */
export const RECHECK_GET_CONCURRENCY = 16

interface Plan {
  readonly pod: PodProjection
  readonly ref: string
  /** pool name → entries of this pod, with the network name for Events. */
  readonly entries: Map<string, { readonly pool: PoolRecord; readonly network: string; readonly list: Array<PoolEntry> }>
  /** Pools named by the pod's NADs that the cache has not seen: read them live. */
  readonly liveReads: Map<string, string>
  /** Networks whose NAD config turns overlapping-range reservations off: nothing to delete there. */
  readonly noReservations: Set<string>
  /** NADs named by the pod that no longer exist (warned about only when something is freed). */
  readonly missingNads: Array<string>
}

const apiError = (pod: string, e: KubeError) =>
  new ReconcileError({ reason: "ApiError", pod, retryable: isRetryableKubeError(e), detail: e.message, cause: e })

/** Works out, from caches only, what a deleted pod holds; fails for unreadable annotations or NAD configs. */
const plan = (pod: PodProjection) =>
  Effect.gen(function* () {
    const caches = yield* Caches
    const nadConfigs = yield* NadConfigs
    const events = yield* EventRecorder
    const ref = podRef(pod)
    const regarding = { kind: "Pod" as const, namespace: pod.namespace, name: pod.name, uid: pod.uid }
    const p: Plan = { pod, ref, entries: new Map(), liveReads: new Map(), noReservations: new Set(), missingNads: [] }
    const add = (pool: PoolRecord, network: string) => {
      const mine = pool.pool.entries.filter((e) => e.podref === ref)
      if (mine.length === 0) return false
      const existing = p.entries.get(pool.name)
      if (existing === undefined) p.entries.set(pool.name, { pool, network, list: [...mine] })
      return true
    }

    const attachments = podAttachments(pod)
    if (Either.isLeft(attachments)) {
      yield* events.record(regarding, "Warning", REASON_BAD_ANNOTATION, `cannot read ${attachments.left.annotation}: ${attachments.left.message}; no address freed`)
      return yield* new ReconcileError({ reason: "BadAnnotation", pod: ref, retryable: false, detail: attachments.left.message, cause: attachments.left })
    }
    for (const att of attachments.right.attachments) {
      const nad = caches.nads.get(`${att.namespace}/${att.name}`)
      if (Option.isNone(nad)) {
        p.missingNads.push(`${att.namespace}/${att.name}`)
        continue
      }
      const decoded = nadConfigs.decode(nad.value)
      if (Either.isLeft(decoded)) {
        // A NAD without any ipam is simply not ours.
        if (decoded.left.reason === "MissingIpam") continue
        yield* events.record(
          regarding,
          "Warning",
          REASON_BAD_CONFIG,
          `network-attachment-definition ${att.namespace}/${att.name} has an invalid whereabouts config (${decoded.left.reason}: ${decoded.left.message}); no address freed`
        )
        return yield* new ReconcileError({
          reason: "BadNadConfig",
          pod: ref,
          retryable: false,
          detail: `NAD ${att.namespace}/${att.name}: ${decoded.left.message}`,
          cause: decoded.left
        })
      }
      if (decoded.right._tag === "NotWhereabouts") continue
      const config = decoded.right.config
      if (!config.enableOverlappingRanges) p.noReservations.add(config.networkName)
      for (const range of config.ranges) {
        const name = poolName(range.range, config.networkName)
        const cached = caches.pools.get(name)
        // A cached pool without this pod's entries was almost always freed by CNI DEL already: the
        // allocation was written long before the pod's status and deletion, and reading the pool
        // again for every ordinary deletion would cost a GET of a large object. Only a pool the
        // cache has never seen is read live; the sweep covers the rest.
        if (Option.isNone(cached)) p.liveReads.set(name, nad.value.name)
        else add(cached.value, nad.value.name)
      }
    }
    // Whatever else carries this podref - NAD deleted first, status missing, range changed since.
    for (const pool of caches.pools.byIndex(PODREF_INDEX, ref)) {
      add(pool, poolNetworkName(pool.name, pool.pool.range) || pool.name)
      p.liveReads.delete(pool.name)
    }
    return p
  })

/**
 * The pods (by podref) that exist right now under these namespace/names: per namespace, GETs, or
 * one LIST for many (`recheckByList`; `namespacePods` tells how many pods the cache holds in the
 * namespaces asked about, and without it a namespace counts as small). `metadataOnly` when only
 * existence matters (see Pods): the server sends PartialObjectMetadata, a fraction of a pod.
 */
export const livePodsByRef = (
  refs: ReadonlyArray<{ readonly namespace: string; readonly name: string }>,
  options: ReadOptions = {},
  namespacePods?: (namespaces: ReadonlySet<string>) => ReadonlyMap<string, number>
) =>
  Effect.gen(function* () {
    const pods = yield* Pods
    const found = new Map<string, PodProjection>()
    const { apiQps } = yield* ControllerConfig
    const byNamespace = new Map<string, Array<{ readonly namespace: string; readonly name: string }>>()
    for (const r of refs) {
      const list = byNamespace.get(r.namespace)
      if (list === undefined) byNamespace.set(r.namespace, [r])
      else list.push(r)
    }
    // Sizes only matter for namespaces with enough refs to list at all.
    const large = new Set([...byNamespace].filter(([, rs]) => rs.length > listRecheckThreshold(apiQps)).map(([ns]) => ns))
    const sizes = large.size > 0 && namespacePods !== undefined ? namespacePods(large) : new Map<string, number>()
    const listed = new Set([...large].filter((ns) => recheckByList(byNamespace.get(ns)!.length, sizes.get(ns) ?? 0, apiQps)))
    const got = [...byNamespace].filter(([ns]) => !listed.has(ns)).flatMap(([, rs]) => rs)
    yield* Effect.all(
      [
        Effect.forEach(got, (r) => Effect.map(pods.get(r.namespace, r.name, options), Option.map((p) => found.set(podRef(p), p))), {
          concurrency: RECHECK_GET_CONCURRENCY,
          discard: true
        }),
        Effect.forEach(listed, (ns) => Effect.map(pods.list(ns, options), (list) => list.forEach((p) => found.set(podRef(p), p))), {
          concurrency: 2,
          discard: true
        })
      ],
      { concurrency: 2, discard: true }
    )
    return found
  })

/** Pods the cache holds in each of these namespaces (one pass over the pod cache). */
const cachedPodsIn = (caches: Caches["Type"]) => (namespaces: ReadonlySet<string>): ReadonlyMap<string, number> => {
  const counts = new Map<string, number>()
  for (const p of caches.pods.values()) if (namespaces.has(p.namespace)) counts.set(p.namespace, (counts.get(p.namespace) ?? 0) + 1)
  return counts
}

/**
 * An entry we meant to free that now carries the same podref under another id was taken back by a
 * reborn pod of that name (its idempotent re-ADD writes the new container id but leaves the
 * reservation as it found it): give back the reservation deleted before the release. Best effort;
 * until it runs, the reborn pod is briefly without its reservation.
 */
export const restoreReservations = (
  pool: string,
  entries: ReadonlyArray<ReleaseEntry>,
  deletedFor: (key: string) => ReadonlySet<string> | undefined
) =>
  Effect.gen(function* () {
    const store = yield* IPPoolStore
    const reservations = yield* Reservations
    const current = yield* store.get(pool)
    const network = poolNetworkName(pool, current.pool.range)
    if (network === undefined) return
    for (const s of entries) {
      const now = current.pool.entries.find((e) => e.key === s.key)
      // Still the dead pod's (same id), someone else's, or gone: nothing to give back.
      if (now === undefined || now.podref !== s.podref || now.id === s.id) continue
      const name = reservationName(now.ip, network)
      if (deletedFor(s.key)?.has(name) !== true) continue
      yield* reservations.restore(name, { podref: now.podref, containerid: now.id, ...(now.ifname === undefined ? {} : { ifname: now.ifname }) })
    }
  }).pipe(
    Effect.catchAll((e) =>
      Effect.logWarning("could not restore the reservation of an address a reborn pod took back").pipe(Effect.annotateLogs({ pool, error: e.message }))
    )
  )

/** The services a reconcile reads and writes through. */
export type ReconcileRequirements = Caches | NadConfigs | EventRecorder | IPPoolStore | Reservations | Pods | ControllerConfig

export interface BatchOutcome {
  readonly results: ReadonlyArray<PodResult>
  /**
   * Writes the Normal Event of every address freed (and the Warnings of NADs that were gone).
   * Not yet run: the addresses are free already, so the deletion loop writes them in the
   * background and its worker takes the next batch; `reconcilePods` runs it before returning.
   */
  readonly events: Effect.Effect<void>
}

/**
 * Reconciles a batch of deleted pods. Never fails as a whole: each pod gets its own result, so
 * one bad annotation or a failed write for one pool does not hold back the others.
 */
export const reconcileBatch = (batch: ReadonlyArray<PodProjection>): Effect.Effect<BatchOutcome, never, ReconcileRequirements> =>
  Effect.gen(function* () {
    const store = yield* IPPoolStore
    const reservations = yield* Reservations
    const caches = yield* Caches
    const events = yield* EventRecorder
    const results = new Map<string, Either.Either<Outcome, ReconcileError>>()
    const fail = (ref: string, e: ReconcileError) => {
      if (!results.has(ref) || Either.isRight(results.get(ref)!)) results.set(ref, Either.left(e))
    }

    // 1. What does each pod hold, according to the caches?
    const plans: Array<Plan> = []
    for (const pod of batch) {
      const planned = yield* Effect.either(plan(pod))
      if (Either.isLeft(planned)) {
        fail(podRef(pod), planned.left)
        continue
      }
      // Two incarnations of one pod (same name, other uid) share the podref, so they own the same
      // entries: one plan for both, or the batch patch removes each entry twice and is rejected.
      const same = plans.find((p) => p.ref === planned.right.ref)
      if (same === undefined) plans.push(planned.right)
      else {
        for (const [name, e] of planned.right.entries) if (!same.entries.has(name)) same.entries.set(name, e)
        for (const [name, network] of planned.right.liveReads) if (!same.entries.has(name)) same.liveReads.set(name, network)
        for (const network of planned.right.noReservations) same.noReservations.add(network)
        for (const nad of planned.right.missingNads) if (!same.missingNads.includes(nad)) same.missingNads.push(nad)
      }
    }

    // 2. Pools the cache has not seen yet are read live (a pool event may still be on its way).
    const liveNames = new Set(plans.flatMap((p) => [...p.liveReads.keys()]))
    const livePools = new Map<string, PoolRecord>()
    for (const name of liveNames) {
      const read = yield* Effect.either(store.get(name))
      if (Either.isRight(read)) livePools.set(name, read.right)
      else if (read.left.reason !== "NotFound") {
        for (const p of plans) if (p.liveReads.has(name)) fail(p.ref, apiError(p.ref, read.left))
      }
    }
    for (const p of plans) {
      for (const [name, network] of p.liveReads) {
        const pool = livePools.get(name)
        const mine = pool?.pool.entries.filter((e) => e.podref === p.ref) ?? []
        if (pool !== undefined && mine.length > 0 && !p.entries.has(name)) p.entries.set(name, { pool, network, list: mine })
      }
    }

    // 3. A live pod of the same name (a StatefulSet pod reborn, or not yet gone) keeps everything.
    // Reservations the pod owns, read before the re-check: one created later can only be a reborn pod's.
    const owned = new Map(plans.map((p) => [p.ref, caches.reservations.byIndex(PODREF_INDEX, p.ref).map((r) => r.name)] as const))
    const holders = plans.filter((p) => !results.has(p.ref) && (p.entries.size > 0 || (owned.get(p.ref)?.length ?? 0) > 0))
    // Existence is all this asks: metadata only.
    const live = yield* Effect.either(livePodsByRef(holders.map((p) => p.pod), { metadataOnly: true }, cachedPodsIn(caches)))
    if (Either.isLeft(live)) {
      for (const p of holders) fail(p.ref, apiError(p.ref, live.left))
    }
    const alive = Either.getOrElse(live, () => new Map<string, PodProjection>())
    const toFree = holders.filter((p) => {
      if (results.has(p.ref)) return false
      const same = alive.get(p.ref)
      if (same === undefined) return true
      results.set(p.ref, Either.right({ _tag: "Kept", why: `pod ${p.ref} exists again (uid ${same.uid}) and holds these addresses` }))
      return false
    })

    // 4 and 5. Reservations, then one guarded patch per pool for the whole batch. Reservations go
    //    first while the pool still holds their entries, so a CNI ADD never meets a free address
    //    whose stale reservation costs it one of its retries (a batch frees hundreds at once); a
    //    pod whose reservations failed waits for its retry. A batch with no more reservations than
    //    one wave of deletes does both at once instead — one round trip less before the address is
    //    free (what a single deletion waits for), the stale window as short as that round trip. Its
    //    pool entries are then freed even when a reservation delete fails: the pod is retried for
    //    the reservation, and what was freed is reported (`Freed` with `pending`).
    //    Either way, a reservation a reborn pod of the same name keeps using is restored after both.
    const reservationNames = new Map<string, Set<string>>()
    for (const p of toFree) {
      const names = new Set(owned.get(p.ref) ?? [])
      for (const [name, { pool, list }] of p.entries) {
        const network = poolNetworkName(name, pool.pool.range)
        if (network !== undefined && !p.noReservations.has(network)) for (const e of list) names.add(reservationName(e.ip, network))
      }
      reservationNames.set(p.ref, names)
    }
    const together = [...reservationNames.values()].reduce((n, names) => n + names.size, 0) <= RESERVATION_CONCURRENCY
    const reservationFailed = new Map<string, ReconcileError>()
    const deletedReservations = new Map<string, Set<string>>()
    const deleteReservations = Effect.forEach(
      toFree,
      (p) =>
        Effect.gen(function* () {
          const deleted = new Set<string>()
          deletedReservations.set(p.ref, deleted)
          for (const name of reservationNames.get(p.ref) ?? []) {
            // Reservations are never updated, only created and deleted: one that changed since the
            // cache saw it was re-created (by a pod reborn under this name, say) and is not ours.
            const cached = Option.getOrUndefined(caches.reservations.get(name))
            const outcome = yield* Effect.either(
              cached === undefined
                ? reservations.deleteFor(name, p.ref)
                : cached.podref === p.ref
                  ? reservations.deleteListed(cached)
                  : Effect.succeed("reassigned" as const)
            )
            if (Either.isLeft(outcome)) {
              if (!reservationFailed.has(p.ref)) reservationFailed.set(p.ref, apiError(p.ref, outcome.left))
            } else if (outcome.right === "deleted") deleted.add(name)
          }
        }),
      { concurrency: RESERVATION_CONCURRENCY, discard: true }
    )

    const freed = new Map<string, Array<FreedIP & { readonly entry: PoolEntry }>>()
    /** Entries a release did not free, per pool: their reservations may need restoring. */
    const toRestore: Array<{ readonly pool: string; readonly entries: ReadonlyArray<ReleaseEntry>; readonly deletedFor: (key: string) => ReadonlySet<string> | undefined }> = []
    const releasePools = (pods: ReadonlyArray<Plan>) =>
      Effect.suspend(() => {
        const perPool = new Map<string, Array<{ plan: Plan; entry: PoolEntry; network: string }>>()
        for (const p of pods) {
          for (const [name, { network, list }] of p.entries) {
            let bucket = perPool.get(name)
            if (bucket === undefined) perPool.set(name, (bucket = []))
            for (const entry of list) bucket.push({ plan: p, entry, network })
          }
        }
        return Effect.forEach(
          [...perPool],
          ([name, items]) =>
            Effect.gen(function* () {
              const entries: Array<ReleaseEntry> = items.map(({ entry }) => ({ key: entry.key, podref: entry.podref, id: entry.id, ip: entry.ip, ifname: entry.ifname }))
              const deletedFor = (key: string) => deletedReservations.get(items.find((i) => i.entry.key === key)?.plan.ref ?? "")
              const out = yield* Effect.either(store.release(name, entries))
              if (Either.isLeft(out)) {
                for (const { plan: p } of items) fail(p.ref, apiError(p.ref, out.left))
                // The retry will find a reborn pod alive and keep everything: restore what it re-took now.
                toRestore.push({ pool: name, entries, deletedFor })
                return
              }
              const releasedKeys = new Set(out.right.released.map((e) => e.key))
              for (const { plan: p, entry, network } of items) {
                if (!releasedKeys.has(entry.key)) continue
                let list = freed.get(p.ref)
                if (list === undefined) freed.set(p.ref, (list = []))
                list.push({ ip: formatIP(entry.ip), pool: name, network, entry })
              }
              if (out.right.skipped.length > 0) toRestore.push({ pool: name, entries: out.right.skipped, deletedFor })
            }),
          { concurrency: 4, discard: true }
        )
      })

    if (together) {
      yield* Effect.all([deleteReservations, releasePools(toFree)], { concurrency: 2, discard: true })
    } else {
      yield* deleteReservations
      for (const [ref, e] of reservationFailed) fail(ref, e)
      yield* releasePools(toFree.filter((p) => !results.has(p.ref)))
    }
    for (const r of toRestore) yield* restoreReservations(r.pool, r.entries, r.deletedFor)

    // 6. The outcome of each pod, and the Events for what was actually freed (written by the caller).
    for (const p of toFree) {
      if (results.has(p.ref)) continue
      const mine = freed.get(p.ref) ?? []
      // Both at once: a reservation left to delete is retried; what was freed is reported now.
      const pending = together ? reservationFailed.get(p.ref) : undefined
      const reservationsDeleted = deletedReservations.get(p.ref)?.size ?? 0
      results.set(
        p.ref,
        Either.right({
          _tag: "Freed",
          freed: mine.map(({ ip, pool, network }) => ({ ip, pool, network })),
          reservations: reservationsDeleted,
          ...(pending === undefined ? {} : { pending })
        })
      )
    }
    const writeEvents = Effect.forEach(
      toFree,
      (p) =>
        Effect.gen(function* () {
          const mine = freed.get(p.ref) ?? []
          const regarding = { kind: "Pod" as const, namespace: p.pod.namespace, name: p.pod.name, uid: p.pod.uid }
          // A missing NAD only matters when this pod had addresses to free (which the podref index
          // found anyway); any deleted pod of some other, long-gone network is not our business.
          if (mine.length > 0) {
            for (const nad of p.missingNads) {
              yield* events.record(regarding, "Warning", REASON_NAD_MISSING, `network-attachment-definition ${nad} not found; freeing the pod's addresses found by podref`)
            }
          }
          for (const f of mine) {
            yield* events.record(regarding, "Normal", REASON_GARBAGE_COLLECTED, garbageCollectedMessage(f.ip, f.network))
          }
        }),
      { concurrency: 16, discard: true }
    )

    // Incarnations of one pod shared one plan: what it freed is reported once, not once per incarnation.
    const reported = new Set<string>()
    const out = batch.map((pod): PodResult => {
      const ref = podRef(pod)
      const result = results.get(ref) ?? Either.right({ _tag: "Freed", freed: [], reservations: 0 })
      const twin = reported.has(ref) && Either.isRight(result) && result.right._tag === "Freed"
      reported.add(ref)
      return { pod, result: twin ? Either.right({ _tag: "Freed", freed: [], reservations: 0 }) : result }
    })
    return { results: out, events: writeEvents }
  })

/** `reconcileBatch` with its Events written before it returns. */
export const reconcilePods = (batch: ReadonlyArray<PodProjection>) =>
  Effect.flatMap(reconcileBatch(batch), ({ events, results }) => Effect.as(events, results))

/** One deleted pod, as a typed Effect: fails with ReconcileError when it could not be done. */
export const reconcilePod = (pod: PodProjection) =>
  Effect.flatMap(reconcilePods([pod]), ([r]) => (r === undefined ? Effect.die("empty batch") : r.result))
