/**
 * Helpers for tests that run the controller's loops over the in-memory world: start the
 * deletion loop and know it listens, wait under TestClock, and check the pool invariants
 * ("no live pod loses its address, no dead pod keeps one, no address is shared") at rest.
 */
import { Deferred, Effect, type Fiber, TestClock } from "effect"
import { type Attachment, type RunningPod, addAttachments, deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { type RunningLoop, runDeletionLoop } from "../../src/programs/deletion-loop.ts"
import { formatIP } from "../../src/domain/ip.ts"
import { NETWORK_STATUS_ANNOTATION } from "../../src/domain/multus.ts"
import { parsePool } from "../../src/domain/pool.ts"
import { ControllerConfig } from "../../src/services/ControllerConfig.ts"
import { InMemoryCluster } from "../../src/testing/InMemoryCluster.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { CLEAN, type Violations, secondaryIPs, violations } from "./invariants.ts"

export { on } from "./objects.ts"
export { metric } from "../../src/testing/prom.ts"


/**
 * Forks the deletion loop in the current scope, and returns once it listens for deletions and its
 * workers are up (`onSynced` has run), so a deletion made afterwards cannot be missed.
 */
export const startDeletionLoop = <E = never, R = never>(
  onSynced: Effect.Effect<void, E, R> | ((loop: RunningLoop) => Effect.Effect<void, E, R>) = Effect.void as Effect.Effect<void, E, R>
) =>
  Effect.gen(function* () {
    const ready = yield* Deferred.make<void>()
    const synced = (loop: RunningLoop) => Effect.zipRight(Effect.isEffect(onSynced) ? onSynced : onSynced(loop), Deferred.succeed(ready, undefined))
    const fiber = yield* Effect.forkScoped(runDeletionLoop({ onSynced: synced }))
    yield* Deferred.await(ready)
    return fiber as Fiber.RuntimeFiber<never, E>
  })

/**
 * Under TestClock: a few turns of the event loop without moving time. @effect/vitest registers no
 * fiber supervisor, so `TestClock.adjust(0)` cannot wait for "every fiber suspended": each call is
 * one macrotask turn. Good for "nothing more happens" checks; wait for progress with `settleUntil`.
 */
export const settle = Effect.repeatN(TestClock.adjust(0), 9)

/** Under TestClock: turns the event loop until `cond` holds (no time passes); dies after `steps` turns. */
export const settleUntil = <E, R>(cond: () => Effect.Effect<boolean, E, R>, what: string, steps = 500) =>
  Effect.gen(function* () {
    for (let i = 0; i < steps; i++) {
      if (yield* cond()) return
      yield* TestClock.adjust(0)
    }
    return yield* Effect.dieMessage(`still waiting for: ${what}`)
  })

/** What the CNI plugin left in a pool, read from the cluster: IP text → allocation. */
export const poolState = (pool: string) =>
  Effect.gen(function* () {
    const cluster = yield* InMemoryCluster
    const { namespace } = yield* ControllerConfig
    const o = cluster.snapshot(R.IPPools, namespace).find((p) => p.metadata.name === pool)
    const spec = (o?.["spec"] ?? { range: "", allocations: {} }) as { range: string; allocations: Record<string, unknown> }
    const parsed = parsePool({ metadata: { name: pool }, spec })
    return new Map(parsed.entries.map((e) => [formatIP(e.ip), { podref: e.podref, id: e.id, ifname: e.ifname }] as const))
  })

export interface RestReport extends Violations {
  readonly allocations: number
}

/**
 * The three invariants of one pool at rest, as lists of violations (empty = fine), plus the
 * same for the overlapping-range reservations of an unnamed network.
 */
export const restReport = (pool: string, namespace = "default") =>
  Effect.gen(function* () {
    const cluster = yield* InMemoryCluster
    const { namespace: poolNs } = yield* ControllerConfig
    const entries = yield* poolState(pool)
    const live = new Map(cluster.snapshot(R.Pods, namespace).map((p) => [`${namespace}/${p.metadata.name}`, secondaryIPs(p)] as const))
    const reservations = new Map(
      cluster.snapshot(R.OverlappingRangeIPReservations, poolNs).map((r) => [r.metadata.name, (r["spec"] as { podref: string }).podref] as const)
    )
    const poolHolders = new Map([...entries].map(([ip, a]) => [ip, a.podref] as const))
    const found = violations({ live, poolHolders, reservations })
    return { ...found, allocations: entries.size } satisfies RestReport
  })

export { CLEAN }

/**
 * The kubelet retrying a pod's sandbox after a failed CNI ADD: a new container id, the plugin
 * again for each attachment, then Multus' network-status.
 */
export const retrySandbox = (namespace: string, name: string, attachments: ReadonlyArray<Attachment>, containerId: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const pod = yield* api.get(R.Pods, namespace, name)
    const ips = yield* addAttachments(namespace, name, containerId, attachments)
    const status = ips.map((i) => ({ name: i.network, interface: i.ifname, ips: i.ips }))
    yield* api.patch(R.Pods, namespace, name, { type: "merge", body: { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: JSON.stringify(status) } } } })
    return { namespace, name, uid: pod.metadata.uid ?? "", containerId, ips } satisfies RunningPod
  })

/**
 * A StatefulSet `name-0..name-(n-1)` as its controller drives it: scale up creates the missing
 * ordinals in order, scale down deletes from the highest ordinal (no CNI DEL: the node is gone or
 * the pod was force-deleted, so the allocation is the controller's to free).
 */
export const statefulSet = (name: string, attachments: ReadonlyArray<Attachment>, namespace = "default") => {
  const pods: Array<RunningPod> = []
  return {
    replicas: () => pods.length,
    pods: (): ReadonlyArray<RunningPod> => pods,
    scaleTo: (n: number) =>
      Effect.gen(function* () {
        while (pods.length < n) pods.push(yield* startPod(namespace, `${name}-${pods.length}`, attachments))
        while (pods.length > n) yield* deletePod(pods.pop()!)
      })
  }
}
