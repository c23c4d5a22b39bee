/**
 * IPPool storage as the controller uses it: live reads and the batched, guarded release. (The
 * plugin's own writes, for the simulation that plays it, are in src/testing/PluginStore.ts.)
 */
import { Array as Arr, Context, Effect, Either, Layer } from "effect"
import type { IPAddress } from "../domain/ip.ts"
import type { IPAllocation } from "../domain/pool.ts"
import { type PoolRecord, toPoolRecord } from "./Caches.ts"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type JsonPatchOp, listItems } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import * as R from "./resources.ts"

/** The API server refuses JSON patches of 10,000 operations or more. */
const MAX_PATCH_OPS = 9_999
/** Each entry takes three operations (releaseOps). */
const ENTRIES_PER_PATCH = Math.floor(MAX_PATCH_OPS / 3)
const MAX_RELEASE_ROUNDS = 5

/** An allocation to free, as it was seen: the patch only removes it if podref and id still match. */
export interface ReleaseEntry {
  readonly key: string
  readonly podref: string
  readonly id: string
  readonly ip: IPAddress
  readonly ifname: string | undefined
}

export interface ReleaseResult {
  readonly released: ReadonlyArray<ReleaseEntry>
  /** Entries that changed or vanished under us; not freed. */
  readonly skipped: ReadonlyArray<ReleaseEntry>
}

export interface IPPoolStoreShape {
  /** Live read (not the cache). */
  readonly get: (name: string) => Effect.Effect<PoolRecord, KubeError>
  /** Live, paginated list of every pool. */
  readonly list: Effect.Effect<ReadonlyArray<PoolRecord>, KubeError>
  /** Frees entries with one JSON patch per ≤3,333 entries, each guarded by `test` ops on its podref and id. */
  readonly release: (name: string, entries: ReadonlyArray<ReleaseEntry>) => Effect.Effect<ReleaseResult, KubeError>
  /** Deletes a pool only if it is still the version seen (one written since is kept): "changed" then, "absent" when gone. */
  readonly deleteIfUnchanged: (name: string, resourceVersion: string | undefined) => Effect.Effect<"deleted" | "changed" | "absent", KubeError>
}

export class IPPoolStore extends Context.Tag("whereabouts-controller/IPPoolStore")<IPPoolStore, IPPoolStoreShape>() {}

/** The JSON pointer of one allocation (offsets are decimal, but escape as RFC 6901 asks). */
export const allocationPointer = (key: string) => `/spec/allocations/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`

/** The guarded removal of these entries: `test` its podref and id, then `remove`, for each. */
export const releaseOps = (entries: ReadonlyArray<ReleaseEntry>): Array<JsonPatchOp> =>
  entries.flatMap((e) => [
    { op: "test", path: `${allocationPointer(e.key)}/podref`, value: e.podref } as const,
    { op: "test", path: `${allocationPointer(e.key)}/id`, value: e.id } as const,
    { op: "remove", path: allocationPointer(e.key) } as const
  ])

/** The store over whatever KubeApi is in context. */
export const make = Effect.gen(function* () {
  const api = yield* KubeApi
  const { namespace, pageSize } = yield* ControllerConfig
  const get = (name: string) => Effect.map(api.get(R.IPPools, namespace, name), toPoolRecord)

  const release = (name: string, entries: ReadonlyArray<ReleaseEntry>): Effect.Effect<ReleaseResult, KubeError> =>
    Effect.gen(function* () {
      const released: Array<ReleaseEntry> = []
      const skipped: Array<ReleaseEntry> = []
      let pending = Arr.chunksOf(entries, ENTRIES_PER_PATCH)
      for (let round = 1; pending.length > 0; round++) {
        const retry: Array<ReleaseEntry> = []
        for (const chunk of pending) {
          // Nothing of the patched pool is needed back (the informer brings it): metadata only.
          const outcome = yield* Effect.either(api.patch(R.IPPools, namespace, name, { type: "json", ops: releaseOps(chunk) }, { metadataOnly: true }))
          if (Either.isRight(outcome)) released.push(...chunk)
          else if (outcome.left.reason === "NotFound") skipped.push(...chunk)
          else if (outcome.left.reason !== "Invalid") return yield* Effect.fail(outcome.left)
          else {
            // Some entry changed under us: re-read, keep what still belongs to the dead pod.
            if (round >= MAX_RELEASE_ROUNDS) return yield* Effect.fail(outcome.left)
            const current = yield* Effect.either(api.get(R.IPPools, namespace, name))
            if (Either.isLeft(current)) {
              if (current.left.reason === "NotFound") skipped.push(...chunk)
              else return yield* Effect.fail(current.left)
              continue
            }
            const raw = (current.right["spec"] as { allocations?: Record<string, IPAllocation> } | undefined)?.allocations ?? {}
            for (const e of chunk) (raw[e.key]?.podref === e.podref && raw[e.key]?.id === e.id ? retry : skipped).push(e)
          }
        }
        pending = Arr.chunksOf(retry, ENTRIES_PER_PATCH)
      }
      return { released, skipped }
    })

  const deleteIfUnchanged = (name: string, resourceVersion: string | undefined) =>
    api.delete(R.IPPools, namespace, name, { preconditions: { resourceVersion } }).pipe(
      Effect.as("deleted" as const),
      Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeed("absent" as const)),
      Effect.catchIf((e) => e.reason === "Conflict", () => Effect.succeed("changed" as const))
    )

  return {
    get,
    deleteIfUnchanged,
    list: listItems(api, R.IPPools, namespace, toPoolRecord, { pageSize }),
    release
  } satisfies IPPoolStoreShape
})

export const layer: Layer.Layer<IPPoolStore, never, KubeApi | ControllerConfig> = Layer.effect(IPPoolStore, make)
