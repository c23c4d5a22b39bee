/**
 * The planner's view of the world (src/domain/holdings.ts `Snapshot`): the informers' caches for
 * the deletion loop, or a fresh listing for the sweep and audit. NAD configs are decoded through
 * NadConfigs (memoised per NAD version, flat-file defaults merged).
 */
import { Effect, Option } from "effect"
import { type Snapshot, poolNaming } from "../domain/holdings.ts"
import type { NodeSlicePoolRecord } from "../domain/node-slices.ts"
import type { ParsedPool, ReservationRecord } from "../domain/pool.ts"
import type { ClaimSource } from "../domain/claims.ts"
import type { EntryLookup, InvariantView } from "../domain/invariants.ts"
import type { NodeRecord } from "../domain/never-runs-again.ts"
import type { PodProjection } from "../domain/pod.ts"
import { type IPAddress, ipEquals, ipKey } from "../domain/ip.ts"
import { Caches, LISTED_IP_INDEX, type NadRecord, PODREF_INDEX } from "../services/Caches.ts"
import { NadConfigs, type NadConfigsShape } from "../services/NadConfigs.ts"

/** Pool naming (NADs and NodeSlicePools), built on first use: a batch may need none of it. */
const lazyNaming = (nads: () => Iterable<NadRecord>, nodeSlicePools: () => ReadonlyArray<NodeSlicePoolRecord>, decoder: NadConfigsShape) => {
  let naming: ReturnType<typeof poolNaming> | undefined
  const get = () => (naming ??= poolNaming([...nads()].map((n) => ({ namespace: n.namespace, name: n.name, config: decoder.decode(n) })), nodeSlicePools()))
  return {
    eventNetwork: (pool, podNamespace) => get().eventNetwork(pool, podNamespace),
    origin: (pool) => get().origin(pool),
    nodeSlice: (nodeSlicePool, node) => get().nodeSlice(nodeSlicePool, node),
    capacity: (pool) => get().capacity(pool),
    reservationNetwork: (pool, unknown) => get().reservationNetwork(pool, unknown)
  } satisfies Pick<Snapshot, "eventNetwork" | "origin" | "nodeSlice" | "capacity" | "reservationNetwork">
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
    ...lazyNaming(() => caches.nads.values(), () => caches.nodeSlicePools.values(), decoder)
  } satisfies Snapshot
})

export const listingSnapshot = (
  pools: ReadonlyMap<string, ParsedPool>,
  reservations: ReadonlyMap<string, ReservationRecord>,
  nads: ReadonlyArray<NadRecord>,
  nodeSlicePools: ReadonlyArray<NodeSlicePoolRecord>
): Effect.Effect<Snapshot, never, NadConfigs> =>
  Effect.map(NadConfigs, (decoder) => {
    const nadsByKey = new Map(nads.map((n) => [`${n.namespace}/${n.name}`, n] as const))
    const [poolList, reservationList] = [[...pools.values()], [...reservations.values()]]
    return {
      pool: (name) => pools.get(name),
      poolsHeldBy: (ref) => poolList.filter((p) => p.entries.some((e) => e.podref === ref)),
      reservation: (name) => reservations.get(name),
      reservationsHeldBy: (ref) => reservationList.filter((r) => r.podref === ref),
      nad: (namespace, name) => {
        const nad = nadsByKey.get(`${namespace}/${name}`)
        return nad === undefined ? undefined : decoder.decode(nad)
      },
      ...lazyNaming(() => nads, () => nodeSlicePools, decoder)
    } satisfies Snapshot
  })

/** The pods whose status lists an address, from the pod cache's index. */
export const cachedListedBy = (caches: Caches["Type"]) => (ip: IPAddress) => caches.pods.byIndex(LISTED_IP_INDEX, ipKey(ip))

/** The pods (by podref) and nodes a sweep or the invariants judge by, and who lists each address. */
export interface PodWorld {
  readonly pods: ReadonlyMap<string, PodProjection>
  readonly nodes: ReadonlyArray<NodeRecord>
  readonly listedBy: (ip: IPAddress) => ReadonlyArray<PodProjection>
}

/**
 * Pods and nodes as the informers hold them: for the controller (listing them again would double its
 * memory). A lagging cache is safe: a pod created since makes candidates the live re-check spares; a
 * pod deleted since is still in it, and its deletion reaches the loop.
 */
export const cachedPods: Effect.Effect<PodWorld, never, Caches> = Effect.map(Caches, (caches) => ({
  pods: caches.pods.byKey,
  nodes: caches.nodes.values(),
  listedBy: cachedListedBy(caches)
}))

/** Who else lists an address (claims.ts), its networks and its own records read through the snapshot. */
export const claimSource = (listedBy: ClaimSource["listedBy"], snapshot: Snapshot): ClaimSource => ({
  listedBy,
  nad: snapshot.nad,
  nodeSlice: snapshot.nodeSlice,
  recordedElsewhere: (ref, ip, reservation, pool) =>
    snapshot.reservation(reservation)?.podref === ref &&
    snapshot.poolsHeldBy(ref).some((p) => p.name !== pool && p.entries.some((e) => e.podref === ref && ipEquals(e.ip, ip)))
})

/** The invariants' view: pods and pools as given, the rest read through a snapshot. */
export const invariantView = (world: Pick<PodWorld, "pods" | "listedBy">, pools: Iterable<ParsedPool>, snapshot: Snapshot, entryAt: EntryLookup): InvariantView => ({
  ...snapshot,
  pods: world.pods.values(),
  pod: (ref) => world.pods.get(ref),
  listedBy: world.listedBy,
  pools,
  entryAt
})
