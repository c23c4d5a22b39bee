/** IPPool store and reservation store behaviour (and the simulation's writer), written once for memory and live. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Option } from "effect"
import { parseIP } from "../../../src/domain/ip.ts"
import { layerWith } from "../../../src/services/ControllerConfig.ts"
import { IPPoolStore, type ReleaseEntry, layer as poolsLayer } from "../../../src/services/IPPoolStore.ts"
import { KubeApi, around } from "../../../src/services/KubeApi.ts"
import { Reservations, layer as reservationsLayer } from "../../../src/services/Reservations.ts"
import * as R from "../../../src/services/resources.ts"
import { PluginStore, layer as pluginLayer } from "../../../src/testing/PluginStore.ts"
import { namespaceObject, poolObject } from "../../support/objects.ts"
import type { ContractTarget } from "./KubeApi.contract.ts"

const entry = (key: string, podref: string, id: string): ReleaseEntry => ({
  key,
  podref,
  id,
  ip: parseIP(`10.7.0.${key}`)!,
  ifname: "net1"
})

export const storesContract = (target: ContractTarget) =>
  describe(`IPPoolStore and Reservations contract (${target.name})`, () => {
    const ns = target.namespace
    // The pool patches the pool store sends (answered or not), counted on its way to the API server.
    let poolPatches = 0
    const counting = Layer.effect(
      KubeApi,
      Effect.map(KubeApi, (api) =>
        around(api, (info, request) =>
          Effect.suspend(() => {
            if (info.verb === "patch" && info.resource === R.IPPools) poolPatches++
            return request
          })
        )
      )
    )
    const env = Layer.provideMerge(
      Layer.mergeAll(poolsLayer.pipe(Layer.provide(counting)), reservationsLayer, pluginLayer),
      Layer.merge(target.layer, layerWith({ namespace: ns, pageSize: 2, reservationPageSize: 2 }))
    )
    /** Pool patches sent since the last call. */
    const patchesSent = () => {
      const n = poolPatches
      poolPatches = 0
      return n
    }
    const run = <A, E>(name: string, body: (api: typeof KubeApi.Service) => Effect.Effect<A, E, IPPoolStore | Reservations | PluginStore | KubeApi>) =>
      Effect.gen(function* () {
        patchesSent()
        const api = yield* KubeApi
        yield* api.create(R.Namespaces, undefined, namespaceObject(ns)).pipe(Effect.ignore)
        yield* api.delete(R.IPPools, ns, name).pipe(Effect.ignore)
        return yield* body(api)
      }).pipe(Effect.provide(env))

    it.live("release removes many entries in one patch and leaves the others", () =>
      run("10.7.0.0-24", (api) =>
        Effect.gen(function* () {
          const allocations: Record<string, { id: string; podref: string; ifname: string }> = {}
          for (let i = 1; i <= 20; i++) allocations[String(i)] = { id: `c${i}`, podref: `${ns}/p${i}`, ifname: "net1" }
          yield* api.create(R.IPPools, ns, poolObject(ns, "10.7.0.0-24", "10.7.0.0/24", allocations))
          const store = yield* IPPoolStore
          const result = yield* store.release("10.7.0.0-24", [1, 2, 3, 4, 5].map((i) => entry(String(i), `${ns}/p${i}`, `c${i}`)))
          expect(patchesSent()).toBe(1)
          expect(result.released.map((e) => e.key)).toEqual(["1", "2", "3", "4", "5"])
          const pool = yield* store.get("10.7.0.0-24")
          expect(pool.pool.entries.map((e) => e.key).sort((a, b) => Number(a) - Number(b))).toEqual(
            Array.from({ length: 15 }, (_, i) => String(i + 6))
          )
        })
      ))

    it.live("an entry changed under us is skipped and the rest still freed; unrelated changes don't conflict", () =>
      run("10.7.1.0-24", (api) =>
        Effect.gen(function* () {
          yield* api.create(
            R.IPPools,
            ns,
            poolObject(ns, "10.7.1.0-24", "10.7.1.0/24", {
              "1": { id: "c1", podref: `${ns}/dead1`, ifname: "net1" },
              "2": { id: "c2", podref: `${ns}/dead2`, ifname: "net1" }
            })
          )
          const store = yield* IPPoolStore
          const writer = yield* PluginStore
          // The CNI plugin re-assigns offset 2 to a new pod and adds offset 3, after we looked.
          yield* writer.updatePool("10.7.1.0-24", (a) =>
            Either.right({ ...a, "2": { id: "new", podref: `${ns}/alive`, ifname: "net1" }, "3": { id: "c3", podref: `${ns}/p3`, ifname: "net1" } })
          )
          const result = yield* store.release("10.7.1.0-24", [entry("1", `${ns}/dead1`, "c1"), entry("2", `${ns}/dead2`, "c2")])
          expect(result.released.map((e) => e.key)).toEqual(["1"])
          expect(result.skipped.map((e) => e.key)).toEqual(["2"])
          expect(patchesSent()).toBe(2)
          const after = yield* store.get("10.7.1.0-24")
          expect(after.pool.entries.map((e) => [e.key, e.podref])).toEqual([
            ["2", `${ns}/alive`],
            ["3", `${ns}/p3`]
          ])
          // An unrelated concurrent write (offset 4) doesn't make a release of offset 3 conflict.
          yield* writer.updatePool("10.7.1.0-24", (a) => Either.right({ ...a, "4": { id: "c4", podref: `${ns}/p4`, ifname: "net1" } }))
          const second = yield* store.release("10.7.1.0-24", [entry("3", `${ns}/p3`, "c3")])
          expect(second.skipped).toEqual([])
          expect(patchesSent()).toBe(1)
        })
      ))

    it.live("the simulation's pool create is idempotent; releasing from a missing pool skips", () =>
      run("10.7.2.0-24", () =>
        Effect.gen(function* () {
          const store = yield* IPPoolStore
          const writer = yield* PluginStore
          const created = yield* writer.createPool("10.7.2.0-24", "10.7.2.0/24")
          expect(created.pool.range).toBe("10.7.2.0/24")
          const again = yield* writer.createPool("10.7.2.0-24", "10.7.2.0/24")
          expect(again.name).toBe("10.7.2.0-24")
          const gone = yield* store.release("no-such-pool", [entry("1", `${ns}/x`, "y")])
          expect(gone.skipped).toHaveLength(1)
        })
      ))

    it.live("reservations: deleteFor deletes only the pod's own, NotFound is fine", () =>
      run("unused", () =>
        Effect.gen(function* () {
          const reservations = yield* Reservations
          const writer = yield* PluginStore
          yield* writer.createReservation("10.7.3.1", { podref: `${ns}/a`, ifname: "net1" })
          yield* writer.createReservation("10.7.3.2", { podref: `${ns}/b`, ifname: "net1" })
          expect(yield* reservations.deleteFor("10.7.3.1", `${ns}/a`)).toBe("deleted")
          expect(yield* reservations.deleteFor("10.7.3.1", `${ns}/a`)).toBe("absent")
          expect(yield* reservations.deleteFor("10.7.3.2", `${ns}/a`)).toBe("reassigned")
          expect(Option.isSome(yield* writer.getReservation("10.7.3.2"))).toBe(true)
          const listed = yield* reservations.list
          expect(listed.map((r) => r.name)).toContain("10.7.3.2")
        })
      ))

    it.live("reservations: restore creates a deleted one again and leaves one that exists as it is", () =>
      run("unused", (api) =>
        Effect.gen(function* () {
          const reservations = yield* Reservations
          const writer = yield* PluginStore
          yield* reservations.restore("10.7.4.1", { podref: `${ns}/a`, ifname: "net1" })
          // As whereabouts 0.9 writes it: no container id.
          expect((yield* api.get(R.OverlappingRangeIPReservations, ns, "10.7.4.1"))["spec"]).toEqual({ podref: `${ns}/a`, ifname: "net1" })
          yield* writer.createReservation("10.7.4.2", { podref: `${ns}/b`, ifname: "net1" })
          yield* reservations.restore("10.7.4.2", { podref: `${ns}/b`, ifname: "net9" })
          const kept = yield* api.get(R.OverlappingRangeIPReservations, ns, "10.7.4.2")
          expect(kept["spec"]).toEqual({ podref: `${ns}/b`, ifname: "net1" })
        })
      ))
  })
