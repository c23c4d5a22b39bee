/**
 * What puts a pod in the release loop's queue: its deletion; an update after which it will never run
 * again; a change of its node (deleted, out of service, Ready); the end of a terminating pod's grace.
 * Judged here on the caches; the live re-check before the write decides (free-pods.ts).
 */
import { Clock, Duration, Effect, FiberMap, Option, type Scope, Stream } from "effect"
import { type NodeRecord, neverRunsAgain, neverRunsAgainAt, nodeFactOf } from "../domain/never-runs-again.ts"
import { type PodProjection, podRef } from "../domain/pod.ts"
import { Caches, NODE_INDEX } from "../services/Caches.ts"
import { ControllerConfig, neverRunsAgainPolicy } from "../services/ControllerConfig.ts"
import type * as WorkQueue from "../services/WorkQueue.ts"
import type { Candidate } from "./free-pods.ts"

/** Queue key: one candidate per pod incarnation. */
const queueKey = (p: PodProjection): string => `${p.namespace}/${p.name}/${p.uid}`

export const podrefOfKey = (key: string): string => key.slice(0, key.lastIndexOf("/"))

/** Tells the loop a candidate was queued (for the heap reclaim). */
type OnQueued = Effect.Effect<void>

const sameFacts = (a: NodeRecord, b: NodeRecord) => a.ready === b.ready && a.readySince === b.readySince && a.outOfService === b.outOfService

/**
 * Queues a live pod that will never run again, now or, by a timer per incarnation, when its grace runs
 * out (judged again then as the cache holds it; a deletion stops the timer). A dry run only logs it,
 * once per incarnation: the sweep's report speaks for it.
 */
const judge = (queue: WorkQueue.WorkQueue<Candidate>, onQueued: OnQueued) =>
  Effect.gen(function* () {
    const caches = yield* Caches
    const config = yield* ControllerConfig
    const policy = neverRunsAgainPolicy(config)
    const reported = new Set<string>()
    const timers = yield* FiberMap.make<string>()
    const dryRun = (pod: PodProjection, key: string, why: string) =>
      reported.has(key)
        ? Effect.void
        : Effect.zipRight(
            Effect.sync(() => reported.add(key)),
            Effect.logInfo("dry run: would free the addresses of a pod that will never run again").pipe(Effect.annotateLogs({ pod: podRef(pod), uid: pod.uid, why }))
          )
    const nodeOf = (pod: PodProjection) =>
      Effect.map(caches.nodes.isSynced, (synced) => nodeFactOf(pod, (name) => Option.getOrUndefined(caches.nodes.get(name)), () => synced))
    /** Queues the pod if it never runs again now; answers when it will if nothing changes. */
    const queueIfEnded = (pod: PodProjection) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const node = yield* nodeOf(pod)
        const key = queueKey(pod)
        const why = neverRunsAgain(pod, node, now, policy)
        if (why !== undefined && config.dryRun) yield* dryRun(pod, key, why.reason)
        else if (why !== undefined) yield* Effect.zipRight(onQueued, queue.add(key, { claim: "NeverRunsAgain", pod, reason: why.reason }, now))
        return why !== undefined || config.dryRun ? undefined : neverRunsAgainAt(pod, node, now, policy)
      })
    /** Once `at` has come, the pod judged again if the cache still holds this incarnation (a timer may fire a little early: it sleeps again). */
    const timer = (pod: PodProjection, at: number) =>
      Effect.gen(function* () {
        for (let next: number | undefined = at; next !== undefined; ) {
          yield* Effect.sleep(Duration.millis(Math.max(0, next - (yield* Clock.currentTimeMillis))))
          const cached = caches.pods.get(podRef(pod))
          if (Option.isNone(cached) || cached.value.uid !== pod.uid) return
          next = yield* queueIfEnded(cached.value)
        }
      })
    const judgePod = (pod: PodProjection) =>
      Effect.gen(function* () {
        const at = yield* queueIfEnded(pod)
        const key = queueKey(pod)
        if (at === undefined) return yield* FiberMap.remove(timers, key)
        yield* FiberMap.run(timers, key, timer(pod, at))
      })
    const forget = (pod: PodProjection) =>
      Effect.suspend(() => {
        const key = queueKey(pod)
        reported.delete(key)
        return FiberMap.remove(timers, key)
      })
    return { judgePod, forget }
  })

/** Feeds the queue from the pod and node informers for as long as the scope lives. */
export const feed = (queue: WorkQueue.WorkQueue<Candidate>, onQueued: OnQueued): Effect.Effect<void, never, Caches | ControllerConfig | Scope.Scope> =>
  Effect.gen(function* () {
    const caches = yield* Caches
    const { judgePod: check, forget } = yield* judge(queue, onQueued)
    const pods = yield* caches.pods.subscribe
    const nodes = yield* caches.nodes.subscribe
    yield* Effect.forkScoped(
      Stream.runForEach(Stream.fromQueue(pods), (e) => {
        if (e.type !== "delete") return check(e.object)
        return Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.all([forget(e.object), onQueued, queue.add(queueKey(e.object), { claim: "Deleted", pod: e.object }, now)], { discard: true })
        )
      })
    )
    yield* Effect.forkScoped(
      Stream.runForEach(Stream.fromQueue(nodes), (e) =>
        e.type === "update" && sameFacts(e.old, e.object) ? Effect.void : Effect.forEach(caches.pods.byIndex(NODE_INDEX, e.object.name), check, { discard: true })
      )
    )
    // What the caches held before this subscription: judged once they are synced, so a pod whose
    // grace runs out later gets its timer too (the start-up sweep sees only what holds now).
    yield* Effect.forkScoped(Effect.zipRight(caches.awaitSynced, Effect.forEach(caches.pods.values(), check, { discard: true })))
  })
