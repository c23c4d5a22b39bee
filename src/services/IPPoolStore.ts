/**
 * IPPool storage: live reads, the batched release used by the controller, and the
 * resourceVersion-guarded update the CNI plugin does (played by tests, demo and benchmarks).
 */
import { Context, Effect, Either, Layer } from "effect"
import type { IPAddress } from "../domain/ip.ts"
import type { IPAllocation } from "../domain/pool.ts"
import { type PoolRecord, toPoolRecord } from "./Caches.ts"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type JsonPatchOp, listProjected } from "./KubeApi.ts"
import { KubeError } from "./KubeError.ts"
import * as R from "./resources.ts"

/** The API server refuses JSON patches of 10,000 operations or more. */
export const MAX_PATCH_OPS = 9_999
const OPS_PER_ENTRY = 3
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
  readonly patches: number
}

export interface IPPoolStoreShape {
  /** Live read (not the cache). */
  readonly get: (name: string) => Effect.Effect<PoolRecord, KubeError>
  /** Live, paginated list of every pool. */
  readonly list: Effect.Effect<ReadonlyArray<PoolRecord>, KubeError>
  /** Frees entries with one JSON patch per ≤3,333 entries, each guarded by `test` ops on its podref and id. */
  readonly release: (name: string, entries: ReadonlyArray<ReleaseEntry>) => Effect.Effect<ReleaseResult, KubeError>
  /** Creates an empty pool; an existing one is returned as is. */
  readonly create: (name: string, range: string) => Effect.Effect<PoolRecord, KubeError>
  /**
   * Read-modify-write of `spec.allocations` guarded by the pool's resourceVersion, as the CNI
   * plugin writes: Conflict (422 on the `test`) when anything changed since the read.
   */
  readonly update: <E>(
    name: string,
    f: (allocations: Readonly<Record<string, IPAllocation>>, pool: PoolRecord) => Either.Either<Readonly<Record<string, IPAllocation>>, E>
  ) => Effect.Effect<PoolRecord, KubeError | E>
}

export class IPPoolStore extends Context.Tag("whereabouts-controller/IPPoolStore")<IPPoolStore, IPPoolStoreShape>() {}

const pointer = (key: string) => `/spec/allocations/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`

const releaseOps = (entries: ReadonlyArray<ReleaseEntry>): Array<JsonPatchOp> =>
  entries.flatMap((e) => [
    { op: "test", path: `${pointer(e.key)}/podref`, value: e.podref } as const,
    { op: "test", path: `${pointer(e.key)}/id`, value: e.id } as const,
    { op: "remove", path: pointer(e.key) } as const
  ])

const chunks = <A>(as: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < as.length; i += size) out.push(as.slice(i, i + size))
  return out
}

/** The store over whatever KubeApi is in context. */
export const make = Effect.gen(function* () {
  const api = yield* KubeApi
  const { namespace, pageSize } = yield* ControllerConfig
  const rawAllocations = (o: { readonly [k: string]: unknown }): Record<string, IPAllocation> =>
    ((o["spec"] as { allocations?: Record<string, IPAllocation> } | undefined)?.allocations ?? {})

  const get = (name: string) => Effect.map(api.get(R.IPPools, namespace, name), toPoolRecord)

  const stillHeld = (raw: Record<string, IPAllocation>) => (e: ReleaseEntry) =>
    raw[e.key]?.podref === e.podref && raw[e.key]?.id === e.id

  const release = (name: string, entries: ReadonlyArray<ReleaseEntry>): Effect.Effect<ReleaseResult, KubeError> =>
    Effect.gen(function* () {
      const released: Array<ReleaseEntry> = []
      const skipped: Array<ReleaseEntry> = []
      let patches = 0
      let pending = chunks(entries, Math.floor(MAX_PATCH_OPS / OPS_PER_ENTRY))
      for (let round = 1; pending.length > 0; round++) {
        const retry: Array<ReleaseEntry> = []
        for (const chunk of pending) {
          patches++
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
            const held = stillHeld(rawAllocations(current.right))
            for (const e of chunk) (held(e) ? retry : skipped).push(e)
          }
        }
        pending = chunks(retry, Math.floor(MAX_PATCH_OPS / OPS_PER_ENTRY))
      }
      return { released, skipped, patches }
    })

  const create = (name: string, range: string) =>
    api.create(R.IPPools, namespace, { metadata: { name, namespace }, spec: { range, allocations: {} } }).pipe(
      Effect.map(toPoolRecord),
      Effect.catchIf((e) => e.reason === "AlreadyExists", () => get(name))
    )

  const update: IPPoolStoreShape["update"] = (name, f) =>
    Effect.gen(function* () {
      const current = yield* api.get(R.IPPools, namespace, name)
      const before = rawAllocations(current)
      const after = yield* f(before, toPoolRecord(current))
      const ops: Array<JsonPatchOp> = [{ op: "test", path: "/metadata/resourceVersion", value: current.metadata.resourceVersion }]
      for (const key of Object.keys(before)) if (!(key in after)) ops.push({ op: "remove", path: pointer(key) })
      for (const [key, a] of Object.entries(after)) {
        const old = before[key]
        if (old === undefined) ops.push({ op: "add", path: pointer(key), value: a })
        else if (old.id !== a.id || old.podref !== a.podref || old.ifname !== a.ifname) ops.push({ op: "replace", path: pointer(key), value: a })
      }
      if (ops.length === 1) return toPoolRecord(current)
      const written = yield* api.patch(R.IPPools, namespace, name, { type: "json", ops }).pipe(
        // A failed resourceVersion test is a conflict: the caller re-reads and retries.
        Effect.mapError((e) => (e.reason === "Invalid" ? new KubeError({ ...e, reason: "Conflict", detail: e.detail }) : e))
      )
      return toPoolRecord(written)
    })

  return {
    get,
    list: listProjected(R.IPPools, namespace, toPoolRecord, { pageSize }).pipe(
      Effect.map(({ items }) => items),
      Effect.provideService(KubeApi, api)
    ),
    release,
    create,
    update
  } satisfies IPPoolStoreShape
})

export const layer: Layer.Layer<IPPoolStore, never, KubeApi | ControllerConfig> = Layer.effect(IPPoolStore, make)
