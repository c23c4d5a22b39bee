/**
 * The full orphan sweep: lists reservations, pools and pods (fresh, paginated), finds what no
 * live pod holds with the domain's orphan detection, re-checks every candidate live right before
 * freeing, and frees through the same guarded batch release as the deletion loop. In dry-run it
 * only reports. Runs once after start-up and then on a cron schedule (UTC).
 */
import { Clock, Cron, Duration, Effect, Either, Schedule } from "effect"
import { type Cidr, bitsOf, formatIP } from "../domain/ip.ts"
import { DEFAULT_RECONCILER_CRON } from "../domain/ipam-config.ts"
import { ORPHAN_REASON_TEXT, type OrphanAllocation, type OrphanReservation, findOrphans } from "../domain/orphans.ts"
import { type PodProjection, podHoldsIP, podRef, splitPodRef } from "../domain/pod.ts"
import { poolName, poolNetworkName } from "../domain/pool.ts"
import { toNadRecord } from "../services/Caches.ts"
import { EventRecorder, REASON_GARBAGE_COLLECTED, garbageCollectedMessage } from "../services/EventRecorder.ts"
import { KubeApi, listProjected } from "../services/KubeApi.ts"
import * as R from "../services/resources.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { IPPoolStore, type ReleaseEntry } from "../services/IPPoolStore.ts"
import type { KubeError } from "../services/KubeError.ts"
import { Metrics } from "../services/Metrics.ts"
import { NadConfigs } from "../services/NadConfigs.ts"
import { Pods } from "../services/Pods.ts"
import { Reservations } from "../services/Reservations.ts"
import { reclaimMemory } from "./memory.ts"
import { livePodsByRef, restoreReservations } from "./reconcile.ts"

export interface PoolReport {
  readonly name: string
  readonly range: string
  readonly network: string
  readonly size: number
  readonly used: number
  readonly free: number
  readonly orphans: number
  readonly invalid: number
}

export interface SweepReport {
  readonly dryRun: boolean
  readonly pools: ReadonlyArray<PoolReport>
  readonly orphanAllocations: ReadonlyArray<OrphanAllocation>
  readonly orphanReservations: ReadonlyArray<OrphanReservation>
  /** What was actually freed / deleted (0 in dry-run). */
  readonly freed: number
  readonly reservationsDeleted: number
  /** Candidates the live re-check (or a changed entry) saved. */
  readonly spared: number
}

/** Addresses a pool's CIDR can hand out (network and broadcast excluded); ranges' own bounds live in NADs. */
export const poolSize = (cidr: Cidr | undefined): number => {
  if (cidr === undefined) return 0
  const hostBits = bitsOf(cidr.family) - cidr.prefix
  return hostBits <= 1 ? 0 : 2 ** hostBits - 2
}

/** Pool name → name of a NAD whose whereabouts config maps to it (for Event messages). */
const nadNamesByPool = Effect.gen(function* () {
  const nadConfigs = yield* NadConfigs
  const { items } = yield* listProjected(R.NetworkAttachmentDefinitions, undefined, toNadRecord)
  const out = new Map<string, string>()
  for (const nad of items) {
    const decoded = nadConfigs.decode(nad)
    if (Either.isLeft(decoded) || decoded.right._tag !== "Whereabouts") continue
    const config = decoded.right.config
    for (const range of config.ranges) out.set(poolName(range.range, config.networkName), nad.name)
  }
  return out
})

/** The sweep's cron: flag/env, else the flat file's `reconciler_cron_expression`, else upstream's default. */
export const sweepSchedule = Effect.gen(function* () {
  const config = yield* ControllerConfig
  const nadConfigs = yield* NadConfigs
  const expression = config.reconcileSchedule ?? nadConfigs.flatFileCron() ?? DEFAULT_RECONCILER_CRON
  const parsed = Cron.parse(expression, "UTC")
  if (Either.isLeft(parsed)) {
    return yield* Effect.fail(new Error(`invalid reconcile schedule "${expression}": ${parsed.left.message}`))
  }
  return { expression, cron: parsed.right }
})

/** One sweep. Never frees in dry-run; otherwise frees only what a live re-check confirms. */
export const runSweep = (
  options: { readonly dryRun: boolean }
): Effect.Effect<SweepReport, KubeError, IPPoolStore | Reservations | Pods | Metrics | ControllerConfig | KubeApi | NadConfigs | EventRecorder> =>
  Effect.gen(function* () {
    const store = yield* IPPoolStore
    const events = yield* EventRecorder
    const reservations = yield* Reservations
    const pods = yield* Pods
    const metrics = yield* Metrics
    const config = yield* ControllerConfig
    // Reservations before pools: a reservation is written after its allocation, so every one
    // listed here has its allocation in the pools listed next (unless it really is stale).
    const reservationList = yield* reservations.list
    const poolList = yield* store.list
    const podList = yield* pods.list()
    const live = new Map(podList.map((p) => [podRef(p), p] as const))
    const orphans = findOrphans(
      poolList.map((p) => p.pool),
      live,
      reservationList.map((r) => ({ metadata: { name: r.name }, spec: { podref: r.podref } }))
    )

    let freed = 0
    let reservationsDeleted = 0
    let spared = 0
    if (!options.dryRun) {
      // Re-check live right before freeing: a pod may have been (re)created since the list.
      const refs = [...new Set([...orphans.allocations.map((o) => o.entry.podref), ...orphans.reservations.map((o) => o.podref)])]
      const now = yield* livePodsByRef(refs.flatMap((r) => splitPodRef(r) ?? []))
      // Still an orphan only if the pod is still gone, or the live pod still provably lacks the IP.
      const confirmed = (o: OrphanAllocation) => {
        const pod: PodProjection | undefined = now.get(o.entry.podref)
        return pod === undefined || podHoldsIP(pod, o.entry.ip, o.entry.ifname) === "not-held"
      }
      const perPool = new Map<string, Array<ReleaseEntry>>()
      for (const o of orphans.allocations) {
        if (!confirmed(o)) {
          spared++
          continue
        }
        let list = perPool.get(o.pool)
        if (list === undefined) perPool.set(o.pool, (list = []))
        list.push({ key: o.entry.key, podref: o.entry.podref, id: o.entry.id, ip: o.entry.ip, ifname: o.entry.ifname })
      }
      // Reservations first, as the deletion loop does: a CNI ADD never meets a free address still
      // reserved by a dead pod, and one a reborn pod took back is given back after the release.
      const deletedReservations = new Set<string>()
      const listedReservations = new Map(reservationList.map((r) => [r.name, r] as const))
      for (const o of orphans.reservations) {
        const pod = now.get(o.podref)
        // A pod alive now keeps the reservation unless its status, read now, proves it lacks the IP:
        // the listing may predate its re-creation (PodGone) or its re-ADD (NoAllocation).
        if (pod !== undefined && (o.reason === "PodGone" || o.ip === undefined || podHoldsIP(pod, o.ip, undefined) !== "not-held")) {
          spared++
          continue
        }
        // Exactly the one listed: a reservation re-created since belongs to whoever re-created it.
        const listed = listedReservations.get(o.name)
        const outcome = yield* (listed === undefined ? reservations.deleteFor(o.name, o.podref) : reservations.deleteListed(listed))
        if (outcome === "deleted") {
          reservationsDeleted++
          deletedReservations.add(o.name)
        } else if (outcome === "reassigned") spared++
      }
      const networks = perPool.size === 0 ? new Map<string, string>() : yield* nadNamesByPool
      for (const [pool, entries] of perPool) {
        const result = yield* store.release(pool, entries)
        freed += result.released.length
        spared += result.skipped.length
        if (result.skipped.length > 0) yield* restoreReservations(pool, result.skipped, () => deletedReservations)
        for (const e of result.released) {
          const ip = formatIP(e.ip)
          yield* Effect.logInfo("sweep freed orphaned allocation").pipe(Effect.annotateLogs({ pool, ip, podref: e.podref }))
          const pod = splitPodRef(e.podref)
          if (pod !== undefined) {
            // The pod is usually gone (uid unknown); the Event still lands where users look for it.
            const network = networks.get(pool) ?? (poolNetworkName(pool, poolList.find((p) => p.name === pool)?.pool.range ?? "") || pool)
            yield* events.record({ kind: "Pod", ...pod, uid: now.get(e.podref)?.uid ?? "" }, "Normal", REASON_GARBAGE_COLLECTED, garbageCollectedMessage(ip, network))
          }
        }
      }
      yield* metrics.ipsFreed("sweep", freed)
      yield* metrics.reservationsDeleted("sweep", reservationsDeleted)
    }

    const orphansByPool = new Map<string, number>()
    for (const o of orphans.allocations) orphansByPool.set(o.pool, (orphansByPool.get(o.pool) ?? 0) + 1)
    const pools = poolList.map((p): PoolReport => {
      const size = poolSize(p.pool.cidr)
      return {
        name: p.name,
        range: p.pool.range,
        network: poolNetworkName(p.name, p.pool.range) ?? "",
        size,
        used: p.pool.entries.length,
        free: Math.max(0, size - p.pool.entries.length),
        orphans: orphansByPool.get(p.name) ?? 0,
        invalid: p.pool.invalid.length
      }
    })
    for (const p of poolList) {
      for (const bad of p.pool.invalid) {
        yield* Effect.logWarning("pool has an unreadable allocation; left as is").pipe(
          Effect.annotateLogs({ pool: p.name, key: bad.key, reason: bad.reason })
        )
      }
    }
    yield* metrics.pools(pools.map((p) => ({ pool: p.name, size: p.size, used: p.used })), config.poolUsageThreshold)
    yield* metrics.orphans("allocation", orphans.allocations.length, options.dryRun)
    yield* metrics.orphans("reservation", orphans.reservations.length, options.dryRun)
    const report: SweepReport = {
      dryRun: options.dryRun,
      pools,
      orphanAllocations: orphans.allocations,
      orphanReservations: orphans.reservations,
      freed,
      reservationsDeleted,
      spared
    }
    yield* Effect.logInfo(options.dryRun ? "sweep finished (dry run: nothing freed)" : "sweep finished").pipe(
      Effect.annotateLogs({
        pools: pools.length,
        allocations: pools.reduce((n, p) => n + p.used, 0),
        pods: podList.length,
        orphanAllocations: orphans.allocations.length,
        orphanReservations: orphans.reservations.length,
        freed,
        reservationsDeleted,
        spared
      })
    )
    return report
  })

/**
 * A sweep that logs and counts its failure instead of failing (the next one will try again), then
 * gives back the heap it grew (memory.ts).
 */
export const sweepOnce = (options: { readonly dryRun: boolean }) =>
  runSweep(options).pipe(
    Effect.tap(() => Effect.flatMap(Metrics, (m) => m.sweep("success"))),
    Effect.tapError((e) =>
      Effect.zipRight(
        Effect.flatMap(Metrics, (m) => m.sweep("failure")),
        Effect.logError("sweep failed; the next one will retry").pipe(Effect.annotateLogs({ error: e.message }))
      )
    ),
    Effect.option,
    Effect.ensuring(reclaimMemory("sweep"))
  )

/**
 * The longest single sleep: effect treats a sleep beyond setTimeout's limit (2^31 - 1 ms, about
 * 24.8 days) as infinite, so a monthly cron expression slept in one piece would never fire.
 */
export const MAX_SLEEP = Duration.days(24)

/** Sleeps until the clock reads `target` (milliseconds since the epoch), in steps of ≤ MAX_SLEEP. */
export const sleepUntil = (target: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    target <= now ? Effect.void : Effect.zipRight(Effect.sleep(Duration.min(Duration.millis(target - now), MAX_SLEEP)), Effect.suspend(() => sleepUntil(target)))
  )

/** Runs `effect` at every match of the cron expression, forever (the first run at the next match). */
export const onCron = <A, E, R>(cron: Cron.Cron, effect: Effect.Effect<A, E, R>): Effect.Effect<never, E, R> =>
  Effect.forever(Effect.flatMap(Clock.currentTimeMillis, (now) => sleepUntil(Cron.next(cron, new Date(now)).getTime())).pipe(Effect.zipRight(effect)))

/** Sweeps at every match of the cron expression, forever (the first one at the next match). */
export const sweepOnSchedule = (cron: Cron.Cron, options: { readonly dryRun: boolean }) => onCron(cron, sweepOnce(options))

export { ORPHAN_REASON_TEXT }
