/** Test helpers that change and read the world through KubeApi (memory or live alike). */
import { Effect, Option } from "effect"
import { type PodProjection, projectPod } from "../../src/domain/pod.ts"
import { Caches } from "../../src/services/Caches.ts"
import { ControllerConfig } from "../../src/services/ControllerConfig.ts"
import { EventRecorder } from "../../src/services/EventRecorder.ts"
import { KubeApi, type KubeObject, listAll } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { eventually, require } from "./eventually.ts"
import { nadObject, whereaboutsConfig } from "./objects.ts"

/** A NAD with a whereabouts IPAM config (`ipam` gets `type: whereabouts`), or a raw config string. */
export const createNad = (namespace: string, name: string, ipam: Record<string, unknown> | string) =>
  Effect.flatMap(KubeApi, (api) =>
    api.create(R.NetworkAttachmentDefinitions, namespace, nadObject(namespace, name, typeof ipam === "string" ? ipam : whereaboutsConfig(ipam, name)))
  )

/** spec.allocations of a pool, read from the API (not a cache). */
export const allocationsOf = (pool: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const { namespace } = yield* ControllerConfig
    const o = yield* api.get(R.IPPools, namespace, pool)
    return (o["spec"] as { allocations: Record<string, { id: string; podref: string; ifname?: string }> }).allocations
  })

export const podrefsOf = (pool: string) =>
  Effect.map(allocationsOf(pool), (a) => Object.values(a).map((x) => x.podref).sort())

export const reservationNames = Effect.gen(function* () {
  const api = yield* KubeApi
  const { namespace } = yield* ControllerConfig
  const list = yield* api.list(R.OverlappingRangeIPReservations, namespace)
  return list.items.map((o) => o.metadata.name).sort()
})

/** An Event as the tests read it: what it says, and the object it is about (`kind`, `name`, `uid`). */
export interface SeenEvent {
  readonly type: string
  readonly reason: string
  readonly message: string
  readonly kind: string
  readonly name: string
  readonly uid: string
  readonly count: number
  readonly reportingInstance: string
}

const seenEvent = (o: KubeObject): SeenEvent => {
  const e = o as unknown as {
    type: string
    reason: string
    message: string
    count?: number
    reportingInstance?: string
    involvedObject: { kind: string; name: string; uid?: string }
  }
  return {
    type: e.type,
    reason: e.reason,
    message: e.message,
    kind: e.involvedObject.kind,
    name: e.involvedObject.name,
    uid: e.involvedObject.uid ?? "",
    count: e.count ?? 1,
    reportingInstance: e.reportingInstance ?? ""
  }
}

/** The Events of a namespace; where the controller runs in process, once its recorder has written what it had queued. */
export const eventsIn = (namespace: string) =>
  Effect.gen(function* () {
    const recorder = yield* Effect.serviceOption(EventRecorder)
    if (Option.isSome(recorder)) yield* recorder.value.flush
    const { items } = yield* listAll(R.Events, namespace)
    return items.map(seenEvent)
  })

/** The projection the informer would queue for this pod, read live before it is deleted. */
export const projectionOf = (namespace: string, name: string) =>
  Effect.flatMap(KubeApi, (api) => Effect.map(api.get(R.Pods, namespace, name), projectPod))

/** Waits until the caches have seen the pool contents the API has now (real time). */
export const cachesCaughtUp = Effect.gen(function* () {
  const api = yield* KubeApi
  const caches = yield* Caches
  const { namespace } = yield* ControllerConfig
  yield* caches.awaitSynced
  const pools = yield* api.list(R.IPPools, namespace)
  yield* eventually(
    require(
      () => pools.items.every((p) => Option.exists(caches.pools.get(p.metadata.name), (c) => Number(c.resourceVersion) >= Number(p.metadata.resourceVersion))),
      "pool cache behind"
    )
  )
  const res = yield* api.list(R.OverlappingRangeIPReservations, namespace)
  yield* eventually(require(() => res.items.every((r) => Option.isSome(caches.reservations.get(r.metadata.name))), "reservation cache behind"))
  const nads = yield* api.list(R.NetworkAttachmentDefinitions, undefined)
  yield* eventually(require(() => nads.items.every((n) => Option.isSome(caches.nads.get(`${n.metadata.namespace}/${n.metadata.name}`))), "nad cache behind"))
  const slices = yield* api.list(R.NodeSlicePools, namespace).pipe(Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeed({ items: [] })))
  yield* eventually(
    require(
      () => slices.items.every((p) => Option.exists(caches.nodeSlicePools.get(p.metadata.name), (c) => Number(c.resourceVersion) >= Number(p.metadata.resourceVersion))),
      "node slice pool cache behind"
    )
  )
})

export type { PodProjection }
