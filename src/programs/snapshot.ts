/**
 * The planner's view of the world (src/domain/holdings.ts `Snapshot`): the informers' caches for
 * the deletion loop, or a fresh listing for the sweep and audit. NAD configs are decoded through
 * NadConfigs (memoised per NAD version, flat-file defaults merged).
 */
import { Effect, Option } from "effect"
import { type Snapshot, pickNad, poolNadIndex } from "../domain/holdings.ts"
import type { ParsedPool, ReservationRecord } from "../domain/pool.ts"
import { Caches, type NadRecord, PODREF_INDEX } from "../services/Caches.ts"
import { NadConfigs, type NadConfigsShape } from "../services/NadConfigs.ts"

/** Pool → NADs that write it, built on first use (only a pool found through the podref index needs it). */
const lazyNadOfPool = (nads: () => Iterable<NadRecord>, decoder: NadConfigsShape) => {
  let index: ReturnType<typeof poolNadIndex> | undefined
  return (pool: string, podNamespace: string): string | undefined => {
    index ??= poolNadIndex([...nads()].map((n) => ({ namespace: n.namespace, name: n.name, config: decoder.decode(n) })))
    return pickNad(index.get(pool), podNamespace)
  }
}

/** The caches as a snapshot; read it for one batch (it follows the informers as they update). */
export const cacheSnapshot: Effect.Effect<Snapshot, never, Caches | NadConfigs> = Effect.gen(function* () {
  const caches = yield* Caches
  const decoder = yield* NadConfigs
  return {
    pool: (name) => Option.getOrUndefined(caches.pools.get(name))?.pool,
    poolsHeldBy: (ref) => caches.pools.byIndex(PODREF_INDEX, ref).map((p) => p.pool),
    reservation: (name) => Option.getOrUndefined(caches.reservations.get(name)),
    reservationsHeldBy: (ref) => caches.reservations.byIndex(PODREF_INDEX, ref),
    nad: (namespace, name) => Option.getOrUndefined(Option.map(caches.nads.get(`${namespace}/${name}`), decoder.decode)),
    nadOfPool: lazyNadOfPool(() => caches.nads.values(), decoder)
  } satisfies Snapshot
})

/** A fresh listing as a snapshot. */
export const listingSnapshot = (
  pools: ReadonlyArray<ParsedPool>,
  reservations: ReadonlyArray<ReservationRecord>,
  nads: ReadonlyArray<NadRecord>
): Effect.Effect<Snapshot, never, NadConfigs> =>
  Effect.map(NadConfigs, (decoder) => {
    const poolsByName = new Map(pools.map((p) => [p.name, p] as const))
    const reservationsByName = new Map(reservations.map((r) => [r.name, r] as const))
    const nadsByKey = new Map(nads.map((n) => [`${n.namespace}/${n.name}`, n] as const))
    return {
      pool: (name) => poolsByName.get(name),
      poolsHeldBy: (ref) => pools.filter((p) => p.entries.some((e) => e.podref === ref)),
      reservation: (name) => reservationsByName.get(name),
      reservationsHeldBy: (ref) => reservations.filter((r) => r.podref === ref),
      nad: (namespace, name) => {
        const nad = nadsByKey.get(`${namespace}/${name}`)
        return nad === undefined ? undefined : decoder.decode(nad)
      },
      nadOfPool: lazyNadOfPool(() => nads, decoder)
    } satisfies Snapshot
  })
