/**
 * The controller as deployed: probes and metrics, leader election, and while leader the
 * deletion loop, the start-up sweep, the cron sweep, the pool-usage and the invariant monitors.
 */
import { Duration, Effect, Queue, Stream, SubscriptionRef } from "effect"
import { Caches } from "../services/Caches.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { LeaderElection } from "../services/LeaderElection.ts"
import { Metrics } from "../services/Metrics.ts"
import { type RunningLoop, runDeletionLoop } from "./deletion-loop.ts"
import { serveEndpoints } from "./http.ts"
import { makeInvariantMonitor } from "./invariants.ts"
import { monitorPoolUsage } from "./pool-usage.ts"
import { reclaimMemory } from "./memory.ts"
import { effective, onSchedule, startupSchedule, watchSchedule } from "./schedule.ts"
import { cachedPods } from "./snapshot.ts"
import { sweepUntilDone } from "./sweep.ts"

/** Relists this close together are one gap: one sweep. */
const RELIST_SETTLE = Duration.seconds(1)

/**
 * Runs `sweep` after each relist of the pods (once per burst); never returns. A relist means a gap in
 * their watch: a pod created and deleted inside it was in no list and no event; only a sweep finds it.
 */
const sweepAfterRelists = <A, E, R>(sweep: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    // Subscribed at once, so no relist after the call is missed.
    const relists = yield* Effect.flatMap(Caches, (caches) => caches.pods.subscribeRelists)
    for (;;) {
      yield* Queue.take(relists)
      yield* Effect.sleep(RELIST_SETTLE)
      yield* Queue.takeAll(relists)
      yield* Effect.logInfo("pods were listed again after a gap in their watch: sweeping for pods the gap hid")
      yield* sweep
    }
  })

/** Runs until interrupted (SIGTERM): then stops taking work, drains, releases the lease. */
export const runController = Effect.scoped(
  Effect.gen(function* () {
    const config = yield* ControllerConfig
    const caches = yield* Caches
    const leader = yield* LeaderElection
    const metrics = yield* Metrics
    const scheduleSources = yield* startupSchedule
    yield* serveEndpoints(caches.isSynced)
    yield* Effect.forkScoped(Stream.runForEach(leader.changes, metrics.leader))
    const informers = [caches.pods, caches.nads, caches.pools, caches.reservations, caches.nodeSlicePools, caches.nodes, caches.scheduleConfigMap]
    yield* metrics.informersAtScrape(informers.filter((i) => i !== undefined))
    const active = effective(scheduleSources)
    yield* Effect.logInfo("whereabouts-controller starting").pipe(
      Effect.annotateLogs({
        identity: config.identity, namespace: config.namespace, concurrentBatches: config.concurrentBatches, leaderElect: config.leaderElect,
        reconcileSchedule: active.schedule.expression, reconcileScheduleSource: active.source,
        dryRun: config.dryRun, apiQps: config.apiQps, shutdownTimeout: Duration.format(config.shutdownTimeout)
      })
    )
    // The heap grown for the first list of everything is given back once synced (and after each burst of deletions).
    yield* Effect.forkScoped(Effect.zipRight(caches.awaitSynced, reclaimMemory("caches synced")))
    const sweeps = (loop: RunningLoop) => Effect.gen(function* () {
      // One sweep at a time (start-up, scheduled, after a relist), each until it succeeds, leaving the loop's pods to the loop.
      const sweeping = yield* Effect.makeSemaphore(1)
      const invariants = yield* makeInvariantMonitor
      const sweep = sweeping.withPermits(1)(sweepUntilDone({ dryRun: config.dryRun, leave: loop.podrefsHeld, keptFor: loop.keptFor, pods: Effect.provideService(cachedPods, Caches, caches) })).pipe(Effect.tap(() => invariants.evaluate))
      yield* Effect.forkScoped(monitorPoolUsage())
      yield* Effect.forkScoped(invariants.run)
      // Subscribed before the start-up sweep lists anything: a gap after that list is swept again.
      yield* Effect.forkScoped(sweepAfterRelists(sweep))
      // Always on becoming leader: what was deleted while none led is freed now (the first list shows no deletion).
      yield* sweep
      const schedule = yield* watchSchedule(scheduleSources)
      yield* Effect.logInfo("sweeps scheduled").pipe(Effect.annotateLogs(yield* Effect.map(SubscriptionRef.get(schedule), (a) => ({ schedule: a.schedule.expression, source: a.source }))))
      yield* Effect.forkScoped(onSchedule(schedule, sweep))
    })
    return yield* leader.runWhenLeader(runDeletionLoop({ onSynced: (loop) => Effect.forkScoped(sweeps(loop)) }))
  })
)
