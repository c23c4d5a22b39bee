/** Informer/cache behaviour every KubeApi must support, written once for memory and live. */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Queue, Stream } from "effect"
import type { PodProjection } from "../../../src/domain/pod.ts"
import { eventually, require } from "../../support/eventually.ts"
import { Caches, PODREF_INDEX, layer as cachesLayer } from "../../../src/services/Caches.ts"
import { layerWith } from "../../../src/services/ControllerConfig.ts"
import { KubeApi } from "../../../src/services/KubeApi.ts"
import * as R from "../../../src/services/resources.ts"
import { nadObject, namespaceObject, networkStatus, podObject, poolObject, whereaboutsConfig } from "../../support/objects.ts"
import type { ContractTarget } from "./KubeApi.contract.ts"


export const cachesContract = (target: ContractTarget) =>
  describe(`Caches contract (${target.name})`, () => {
    const ns = target.namespace
    const env = Layer.merge(target.layer, layerWith({ namespace: ns, pageSize: 2, reservationPageSize: 2 }))

    it.scopedLive("syncs a paginated list, keeps pod projections, indexes pools and reservations by podref", () =>
      Effect.gen(function* () {
        const api = yield* KubeApi
        yield* api.create(R.Namespaces, undefined, namespaceObject(ns)).pipe(Effect.ignore)
        for (let i = 0; i < 5; i++) {
          yield* api.create(R.Pods, ns, podObject(ns, `p${i}`, { status: networkStatus([{ name: `${ns}/net`, interface: "net1", ips: [`10.5.0.${i + 1}`] }]) }))
        }
        yield* api.create(R.NetworkAttachmentDefinitions, ns, nadObject(ns, "net", whereaboutsConfig({ range: "10.5.0.0/24" })))
        yield* api.create(R.IPPools, ns, poolObject(ns, "10.5.0.0-24", "10.5.0.0/24", { "1": { id: "c0", podref: `${ns}/p0`, ifname: "net1" }, "2": { id: "c1", podref: `${ns}/p1`, ifname: "net1" } }))
        yield* api.create(R.OverlappingRangeIPReservations, ns, { metadata: { name: "10.5.0.1", namespace: ns }, spec: { podref: `${ns}/p0`, ifname: "net1" } })
        // Informers start only now, so the initial (paginated, pageSize 2) list sees everything above.
        const caches = Context.get(yield* Layer.build(cachesLayer), Caches)
        yield* caches.awaitSynced.pipe(Effect.timeout("20 seconds"))
        expect(yield* caches.isSynced).toBe(true)
        const p0 = Option.getOrThrow(caches.pods.get(`${ns}/p0`))
        expect(p0.networkStatus).toContain("10.5.0.1")
        expect(Object.keys(p0).sort()).toEqual(
          ["deletionTimestamp", "disruption", "name", "namespace", "networkStatus", "networks", "nodeName", "phase", "phaseReason", "resourceVersion", "uid"].sort()
        )
        expect(caches.pods.values().filter((p) => p.namespace === ns)).toHaveLength(5)
        expect(Option.isSome(caches.nads.get(`${ns}/net`))).toBe(true)
        expect(caches.pools.byIndex(PODREF_INDEX, `${ns}/p1`).map((p) => p.name)).toEqual(["10.5.0.0-24"])
        expect(caches.reservations.byIndex(PODREF_INDEX, `${ns}/p0`).map((r) => r.name)).toEqual(["10.5.0.1"])
      // Scoped inside the provide: the informers stop before the KubeApi they use is released.
      }).pipe(Effect.scoped, Effect.provide(env)))

    it.scopedLive("pod deletions come out as projections; the podref index follows pool changes", () =>
      Effect.gen(function* () {
        const api = yield* KubeApi
        yield* api.create(R.Namespaces, undefined, namespaceObject(ns)).pipe(Effect.ignore)
        yield* api.create(R.IPPools, ns, poolObject(ns, "10.6.0.0-24", "10.6.0.0/24", { "7": { id: "c7", podref: `${ns}/q1`, ifname: "net1" } }))
        const caches = Context.get(yield* Layer.build(cachesLayer), Caches)
        const deleted = yield* Queue.unbounded<PodProjection>()
        yield* Effect.forkScoped(Stream.runForEach(Stream.fromQueue(yield* caches.pods.subscribe), (e) => (e.type === "delete" ? Queue.offer(deleted, e.object) : Effect.void)))
        yield* caches.awaitSynced.pipe(Effect.timeout("20 seconds"))
        const created = yield* api.create(R.Pods, ns, podObject(ns, "gone", { status: "[]" }))
        yield* eventually(require(() => Option.isSome(caches.pods.get(`${ns}/gone`)), "pod not cached"))
        yield* api.delete(R.Pods, ns, "gone", { gracePeriodSeconds: 0 })
        const projection = yield* Queue.take(deleted).pipe(Effect.timeout("10 seconds"))
        expect(projection).toMatchObject({ namespace: ns, name: "gone", uid: created.metadata.uid, networkStatus: "[]" })
        expect(Option.isNone(caches.pods.get(`${ns}/gone`))).toBe(true)
        yield* eventually(require(() => caches.pools.byIndex(PODREF_INDEX, `${ns}/q1`).length === 1, "pool not indexed"))
        yield* api.patch(R.IPPools, ns, "10.6.0.0-24", { type: "json", ops: [{ op: "remove", path: "/spec/allocations/7" }] })
        yield* eventually(require(() => caches.pools.byIndex(PODREF_INDEX, `${ns}/q1`).length === 0, "still indexed"))
      // Scoped inside the provide: the informers stop before the KubeApi they use is released.
      }).pipe(Effect.scoped, Effect.provide(env)))
  })
