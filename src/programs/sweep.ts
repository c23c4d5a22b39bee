/**
 * The full orphan sweep: finds what no pod holds in a fresh listing, re-checks each candidate live
 * right before freeing it through the planner and executor; in dry-run (`audit`) only plans and reports.
 */
import { Clock, Effect, Either, type Schedule } from "effect"
import { type BadInput, badInputOf } from "../domain/bad-input.ts"
import { type HeldForAnother, listedByIndex, separateHeldForAnother } from "../domain/claims.ts"
import { orphanHoldings } from "../domain/holdings.ts"
import { type OrphanAllocation, type OrphanReservation, findOrphans } from "../domain/orphans.ts"
import { formatIP } from "../domain/ip.ts"
import { type PodProjection, podRef } from "../domain/pod.ts"
import { type NodeSlicePoolRecord, sliceOfNode } from "../domain/node-slices.ts"
import type { ParsedPool } from "../domain/pool.ts"
import { neverRunsAgain, nodeFactOf } from "../domain/never-runs-again.ts"
import { type Holding, type ReleaseError, planRelease } from "../domain/release.ts"
import { backoff } from "../services/backoff.ts"
import { toNadRecord, toNodeSlicePoolRecord } from "../services/Caches.ts"
import { ControllerConfig, neverRunsAgainPolicy } from "../services/ControllerConfig.ts"
import type { EventRecorder } from "../services/EventRecorder.ts"
import { IPPoolStore } from "../services/IPPoolStore.ts"
import { KubeApi, listProjected } from "../services/KubeApi.ts"
import type { KubeError } from "../services/KubeError.ts"
import { Metrics } from "../services/Metrics.ts"
import { NadConfigs } from "../services/NadConfigs.ts"
import { Pods } from "../services/Pods.ts"
import { Reservations } from "../services/Reservations.ts"
import * as R from "../services/resources.ts"
import { execute } from "./executor.ts"
import { type AuditedInvariants, auditInvariants } from "./invariants.ts"
import { reclaimMemory } from "./memory.ts"
import { usageOf } from "./pool-usage.ts"
import { recheckHoldings } from "./recheck.ts"
import { type PodWorld, claimSource, listingSnapshot } from "./snapshot.ts"

export interface PoolReport {
  readonly name: string
  readonly range: string
  /** Its network's name ("" unnamed); a node-slice pool of an unnamed network: its NodeSlicePool's name. */
  readonly network: string
  /** Node-slice pools only: the node, and whether its NodeSlicePool still gives it this slice. */
  readonly node?: string
  readonly owner?: "current" | "stale" | "unknown"
  /** Addresses it can hand out: from its NADs' configs (range_start, range_end, exclude), else its range. */
  readonly size: number
  readonly sizeFrom: "config" | "range"
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
  /** Orphans by their own podref that another live pod's status lists (rule 0): kept. */
  readonly heldForAnother: ReadonlyArray<HeldForAnother>
  /** NADs, pool entries and pods' Multus annotations that cannot be read: each skips only what it describes. */
  readonly badInput: BadInput
  /** Node-slice pools whose NodeSlicePool gives their slice to no node, or to another. */
  readonly staleSlicePools: ReadonlyArray<{ readonly name: string; readonly node: string; readonly used: number }>
  /** Empty stale node-slice pools deleted (--prune-slice-pools). */
  readonly prunedPools: number
  /** Freed, deleted (0 in dry-run), and spared by the live re-check or a changed entry. */
  readonly freed: number
  readonly reservationsDeleted: number
  readonly spared: number
  /** The invariants judged on this listing (audit only). */
  readonly invariants?: AuditedInvariants | undefined
}

/**
 * The whereabouts objects listed fresh (never the caches, which may lag), by name, and their snapshot.
 * Reservations first: one is written after its allocation, so the pools listed next hold it unless it is stale.
 */
export const listWhereabouts = Effect.gen(function* () {
  const config = yield* ControllerConfig
  const reservationList = yield* Effect.flatMap(Reservations, (r) => r.list)
  const poolList = yield* Effect.flatMap(IPPoolStore, (store) => store.list)
  const { items: nads } = yield* listProjected(R.NetworkAttachmentDefinitions, undefined, toNadRecord)
  // Optional: whereabouts before 0.8 has no NodeSlicePool CRD.
  const { items: nodeSlicePools } = yield* listProjected(R.NodeSlicePools, config.namespace, toNodeSlicePoolRecord).pipe(
    Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeed({ items: [] }))
  )
  const pools = new Map(poolList.map((p) => [p.name, p.pool] as const))
  const reservations = new Map(reservationList.map((r) => [r.name, r] as const))
  const snapshot = yield* listingSnapshot(pools, reservations, nads, nodeSlicePools)
  return { poolList, pools, reservations, nads, snapshot }
})

/** Pods and nodes listed fresh: for the commands, which have no caches. */
export const listedPods: Effect.Effect<PodWorld, KubeError, Pods> = Effect.gen(function* () {
  const live = yield* Pods
  const podList = yield* live.list()
  const nodes = yield* live.nodes
  return { pods: new Map(podList.map((p) => [podRef(p), p] as const)), nodes, listedBy: listedByIndex(podList) }
})

/** Everything a sweep looks at: the whereabouts objects listed fresh, then the pods and nodes. */
export const listWorld = <E, R>(pods: Effect.Effect<PodWorld, E, R>) => Effect.zipWith(listWhereabouts, pods, (listed, world) => ({ ...listed, ...world }))

export type World = Effect.Effect.Success<ReturnType<typeof listWorld<never, never>>>

/** The orphans of a listing, as the planner's holdings. */
export const sweepHoldings = (world: World) =>
  Effect.gen(function* () {
    const { pods: live, snapshot } = world
    const pools = [...world.pools.values()]
    const networkOf = (pool: ParsedPool) => snapshot.origin(pool).network
    const nodes = new Map(world.nodes.map((n) => [n.name, n] as const))
    const now = yield* Clock.currentTimeMillis
    const policy = neverRunsAgainPolicy(yield* ControllerConfig)
    // A listing holds every node: one it lacks is gone.
    const ended = (pod: PodProjection) => neverRunsAgain(pod, nodeFactOf(pod, (name) => nodes.get(name), () => true), now, policy)
    const found = findOrphans(pools, live, [...world.reservations.values()], { networkOf, neverRunsAgain: ended })
    const all = orphanHoldings(found, world.pools, world.reservations, snapshot, live)
    // Rule 0: what another listed pod holds is no orphan, whichever podref it names.
    const claims = { ...claimSource(world.listedBy, snapshot), ended: (p: PodProjection) => ended(p) !== undefined }
    return separateHeldForAnother(found, all, claims)
  })

/**
 * A NodeSlicePool read live before its stale pools are deleted: the listing may predate the
 * node-slice controller giving a slice back. Unreadable or gone (undefined): its pools are kept.
 */
const readLive = (nodeSlicePool: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const { namespace } = yield* ControllerConfig
    const read = yield* Effect.either(api.get(R.NodeSlicePools, namespace, nodeSlicePool))
    if (Either.isRight(read)) return toNodeSlicePoolRecord(read.right)
    yield* Effect.logWarning("cannot read a NodeSlicePool live; its stale pools are kept").pipe(
      Effect.annotateLogs({ nodeSlicePool: `${namespace}/${nodeSlicePool}`, error: read.left.message })
    )
    return undefined
  })

/** Deletes the stale node-slice pools that were empty when listed, each only if unchanged since and still stale. */
const pruneSlicePools = (world: World) =>
  Effect.gen(function* () {
    const store = yield* IPPoolStore
    // Each NodeSlicePool read once per prune, however many of its pools are stale.
    const live = new Map<string, NodeSlicePoolRecord | undefined>()
    let pruned = 0
    for (const p of world.poolList) {
      const o = world.snapshot.origin(p.pool)
      if (o._tag !== "Slice" || o.owner !== "stale" || p.pool.entries.length > 0 || p.pool.invalid.length > 0) continue
      if (!live.has(o.nodeSlicePool)) live.set(o.nodeSlicePool, yield* readLive(o.nodeSlicePool))
      const current = live.get(o.nodeSlicePool)
      if (current === undefined || sliceOfNode(current, o.node) === o.slice) continue
      if ((yield* store.deleteIfUnchanged(p.name, p.resourceVersion)) === "deleted") {
        pruned++
        yield* Effect.logInfo("deleted an empty node-slice pool no node owns").pipe(Effect.annotateLogs({ pool: p.name, node: o.node, slice: o.slice }))
      }
    }
    return pruned
  })

interface SweepOptions {
  readonly dryRun: boolean
  /** The podrefs the deletion loop holds, read right before freeing: left to the loop, which knows their pods. */
  readonly leave?: Effect.Effect<ReadonlySet<string>> | undefined
  /** audit's extras: the invariants judged on the listing, and every pod's Multus annotations read for bad input. */
  readonly audit?: boolean | undefined
  /** Where the pods and nodes come from: listed fresh unless given (the controller gives its caches). */
  readonly pods?: Effect.Effect<PodWorld, KubeError> | undefined
  /** Told what rule 0 kept for another pod (the controller's deletion loop looks at it again once that pod goes). */
  readonly keptFor?: ((held: ReadonlyArray<HeldForAnother>) => Effect.Effect<void>) | undefined
}

/** Re-checks the candidates live, frees what is still an orphan, writes its Events; fails after that if any write failed. */
const freeOrphans = (found: ReadonlyArray<Holding>, leave: SweepOptions["leave"]) =>
  Effect.gen(function* () {
    const metrics = yield* Metrics
    const loopHolds = leave === undefined ? new Set<string>() : yield* leave
    const holdings = found.filter((h) => !loopHolds.has(h.podref))
    if (holdings.length < found.length) {
      yield* Effect.logInfo("sweep left orphans to the deletion loop, which holds their pods").pipe(Effect.annotateLogs({ podrefs: found.length - holdings.length }))
    }
    // Re-check live right before freeing: a pod may have been (re)created since the list, or run again.
    const checked = yield* recheckHoldings(holdings)
    const execution = yield* execute(planRelease(checked.holdings, checked.facts))
    for (const [podref, outcome] of execution.outcomes) {
      if (outcome._tag !== "Freed" && outcome._tag !== "PartlyFreed") continue
      for (const f of outcome.freed) yield* Effect.logInfo("sweep freed orphaned allocation").pipe(Effect.annotateLogs({ pool: f.pool, ip: f.ip, podref }))
    }
    // A sweep that ran exports its counters even when it freed nothing.
    yield* metrics.ipsFreed("sweep", 0)
    yield* metrics.reservationsDeleted("sweep", 0)
    const failure = [...execution.outcomes.values()].flatMap((o) => (o._tag === "Failed" || o._tag === "PartlyFreed" ? [o.error] : []))[0]
    if (failure !== undefined) return yield* Effect.fail(failure)
    return execution.counts
  })

export const poolReports = ({ poolList, snapshot }: Pick<World, "poolList" | "snapshot">, orphans: ReadonlyArray<OrphanAllocation>): ReadonlyArray<PoolReport> => {
  const orphansByPool = Map.groupBy(orphans, (o) => o.pool)
  return poolList.map((p): PoolReport => {
    const o = snapshot.origin(p.pool)
    // In this order: audit's JSON prints it as it is.
    return {
      name: p.name, range: p.pool.range,
      ...(o._tag === "Slice" ? { network: o.network || o.nodeSlicePool, node: o.node, owner: o.owner } : { network: o.network ?? "" }),
      ...usageOf(snapshot, p.pool), orphans: orphansByPool.get(p.name)?.length ?? 0, invalid: p.pool.invalid.length
    }
  })
}

/** Warnings for unreadable entries, the orphan gauges, and the sweep's summary line (the pool gauges are pool-usage.ts' alone). */
const reportSweep = (world: World, report: SweepReport) =>
  Effect.gen(function* () {
    const metrics = yield* Metrics
    for (const p of world.poolList) {
      for (const bad of p.pool.invalid) yield* Effect.logWarning("pool has an unreadable allocation; left as is").pipe(Effect.annotateLogs({ pool: p.name, key: bad.key, reason: bad.reason }))
    }
    for (const h of report.heldForAnother) {
      yield* Effect.logWarning("kept an address another live pod lists: held for another").pipe(
        Effect.annotateLogs({ [h.kind === "allocation" ? "pool" : "reservation"]: h.name, ip: h.ip === undefined ? "" : formatIP(h.ip), podref: h.podref, listedBy: h.claimants.join(",") })
      )
    }
    yield* metrics.orphans("allocation", report.orphanAllocations.length, report.dryRun)
    yield* metrics.orphans("reservation", report.orphanReservations.length, report.dryRun)
    yield* Effect.logInfo(report.dryRun ? "sweep finished (dry run: nothing freed)" : "sweep finished").pipe(
      Effect.annotateLogs({
        pools: report.pools.length, allocations: report.pools.reduce((n, p) => n + p.used, 0), pods: world.pods.size,
        orphanAllocations: report.orphanAllocations.length, orphanReservations: report.orphanReservations.length, heldForAnother: report.heldForAnother.length,
        freed: report.freed, reservationsDeleted: report.reservationsDeleted, spared: report.spared
      })
    )
  })

/** One sweep. Never frees in dry-run; otherwise frees only what a live re-check confirms. */
export const runSweep = (
  options: SweepOptions
): Effect.Effect<SweepReport, KubeError | ReleaseError, IPPoolStore | Reservations | Pods | Metrics | ControllerConfig | KubeApi | NadConfigs | EventRecorder> =>
  Effect.gen(function* () {
    const config = yield* ControllerConfig
    const nadConfigs = yield* NadConfigs
    const listedFrom = yield* Clock.currentTimeMillis
    const world = yield* listWorld(options.pods ?? listedPods)
    const { orphans, holdings, heldForAnother } = yield* sweepHoldings(world)
    const done = options.dryRun ? { freed: 0, reservationsDeleted: 0, spared: 0 } : yield* freeOrphans(holdings, options.leave)
    const prunedPools = !options.dryRun && config.pruneSlicePools ? yield* pruneSlicePools(world) : 0
    const pools = poolReports(world, orphans.allocations)
    const invariants = options.audit === true ? yield* auditInvariants(world, listedFrom) : undefined
    const report: SweepReport = {
      dryRun: options.dryRun,
      pools,
      orphanAllocations: orphans.allocations,
      orphanReservations: orphans.reservations,
      heldForAnother,
      badInput: badInputOf(world.nads.map((n) => ({ ...n, config: nadConfigs.decode(n) })), [...world.pools.values()], options.audit === true ? world.pods.values() : []),
      staleSlicePools: pools.flatMap((p) => (p.owner === "stale" ? [{ name: p.name, node: p.node ?? "", used: p.used }] : [])),
      prunedPools,
      ...done,
      ...(invariants === undefined ? {} : { invariants })
    }
    yield* reportSweep(world, report)
    if (!options.dryRun && heldForAnother.length > 0) yield* options.keptFor?.(heldForAnother) ?? Effect.void
    return report
  })

/**
 * Sweeps until one succeeds (after 1 s, doubling, at most a minute apart, jittered), each attempt counted,
 * a failure logged, the heap it grew given back (memory.ts): only a sweep finds the deletions no event
 * brought (queued by a leader that stepped down, or hidden in a watch gap); they must not wait for the next.
 */
export const sweepUntilDone = (options: SweepOptions, retry: Schedule.Schedule<unknown> = backoff("1 second", "1 minute")) =>
  runSweep(options).pipe(
    Effect.tap(() => Effect.flatMap(Metrics, (m) => m.sweep("success"))),
    Effect.tapError((e) =>
      Effect.zipRight(
        Effect.flatMap(Metrics, (m) => m.sweep("failure")),
        Effect.logError("sweep failed").pipe(Effect.annotateLogs({ error: e.message }))
      )
    ),
    Effect.ensuring(reclaimMemory("sweep")),
    Effect.retry(retry),
    Effect.orDie
  )

