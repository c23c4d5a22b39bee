/**
 * The writes only the CNI plugin makes, for the simulation that plays it (tests, the demo and the
 * benchmarks): creating a pool, the plugin's resourceVersion-guarded read-modify-write of its
 * allocations, creating a reservation and its DEL's unguarded delete of one; and its read of a
 * reservation. The controller never makes these calls, so they are not part of its services.
 */
import { Context, Effect, type Either, Layer, Option } from "effect"
import type { IPAllocation } from "../domain/pool.ts"
import { type PoolRecord, type ReservationRecord, toPoolRecord, toReservationRecord } from "../services/Caches.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { KubeApi, type JsonPatchOp, ifExists } from "../services/KubeApi.ts"
import { KubeError } from "../services/KubeError.ts"
import { allocationPointer } from "../services/IPPoolStore.ts"
import * as R from "../services/resources.ts"

export interface PluginStoreShape {
  /** Creates an empty pool; an existing one is returned as is. */
  readonly createPool: (name: string, range: string) => Effect.Effect<PoolRecord, KubeError>
  /**
   * Read-modify-write of `spec.allocations` guarded by the pool's resourceVersion, as the CNI
   * plugin writes: Conflict (422 on the `test`) when anything changed since the read.
   */
  readonly updatePool: <E>(
    name: string,
    f: (allocations: Readonly<Record<string, IPAllocation>>, pool: PoolRecord) => Either.Either<Readonly<Record<string, IPAllocation>>, E>
  ) => Effect.Effect<PoolRecord, KubeError | E>
  /** What the plugin writes on ADD when overlapping ranges are on: podref and ifname, never a container id. */
  readonly createReservation: (name: string, spec: { readonly podref: string; readonly ifname?: string }) => Effect.Effect<ReservationRecord, KubeError>
  /** The reservation of that name, whoever holds it; none when there is none. */
  readonly getReservation: (name: string) => Effect.Effect<Option.Option<ReservationRecord>, KubeError>
  /** What the plugin's DEL deletes: the reservation of that name, whoever holds it; "absent" when there is none. */
  readonly deleteReservation: (name: string) => Effect.Effect<"deleted" | "absent", KubeError>
}

export class PluginStore extends Context.Tag("whereabouts-controller/testing/PluginStore")<PluginStore, PluginStoreShape>() {}

const rawAllocations = (o: { readonly [k: string]: unknown }): Record<string, IPAllocation> =>
  (o["spec"] as { allocations?: Record<string, IPAllocation> } | undefined)?.allocations ?? {}

export const make = Effect.gen(function* () {
  const api = yield* KubeApi
  const { namespace } = yield* ControllerConfig
  const getPool = (name: string) => Effect.map(api.get(R.IPPools, namespace, name), toPoolRecord)

  const createPool = (name: string, range: string) =>
    api.create(R.IPPools, namespace, { metadata: { name, namespace }, spec: { range, allocations: {} } }).pipe(
      Effect.map(toPoolRecord),
      Effect.catchIf((e) => e.reason === "AlreadyExists", () => getPool(name))
    )

  const updatePool: PluginStoreShape["updatePool"] = (name, f) =>
    Effect.gen(function* () {
      const current = yield* api.get(R.IPPools, namespace, name)
      const before = rawAllocations(current)
      const after = yield* f(before, toPoolRecord(current))
      const ops: Array<JsonPatchOp> = [{ op: "test", path: "/metadata/resourceVersion", value: current.metadata.resourceVersion }]
      for (const key of Object.keys(before)) if (!(key in after)) ops.push({ op: "remove", path: allocationPointer(key) })
      for (const [key, a] of Object.entries(after)) {
        const old = before[key]
        if (old === undefined) ops.push({ op: "add", path: allocationPointer(key), value: a })
        else if (old.id !== a.id || old.podref !== a.podref || old.ifname !== a.ifname) ops.push({ op: "replace", path: allocationPointer(key), value: a })
      }
      if (ops.length === 1) return toPoolRecord(current)
      const written = yield* api.patch(R.IPPools, namespace, name, { type: "json", ops }).pipe(
        // A failed resourceVersion test is a conflict: the caller re-reads and retries.
        Effect.mapError((e) => (e.reason === "Invalid" ? new KubeError({ ...e, reason: "Conflict", detail: e.detail }) : e))
      )
      return toPoolRecord(written)
    })

  const createReservation: PluginStoreShape["createReservation"] = (name, spec) =>
    api.create(R.OverlappingRangeIPReservations, namespace, { metadata: { name, namespace }, spec }).pipe(Effect.map(toReservationRecord))

  const getReservation: PluginStoreShape["getReservation"] = (name) =>
    Effect.map(ifExists(api.get(R.OverlappingRangeIPReservations, namespace, name)), Option.map(toReservationRecord))

  const deleteReservation: PluginStoreShape["deleteReservation"] = (name) =>
    api.delete(R.OverlappingRangeIPReservations, namespace, name).pipe(
      Effect.as("deleted" as const),
      Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeed("absent" as const))
    )

  return { createPool, updatePool, createReservation, getReservation, deleteReservation } satisfies PluginStoreShape
})

export const layer: Layer.Layer<PluginStore, never, KubeApi | ControllerConfig> = Layer.effect(PluginStore, make)
