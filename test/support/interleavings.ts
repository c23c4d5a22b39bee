/**
 * A world for interleaving tests: one in-memory cluster, services over a KubeApi whose every call
 * on pods, pools and reservations first waits for a scheduler's go (fast-check's `fc.scheduler()`
 * picks the order), and caches that are snapshots refreshed only when told — so both the order of
 * API writes and the staleness of the controller's caches are the scheduler's to choose.
 */
import { Effect, Layer, Option } from "effect"
import { projectPod, type PodProjection } from "../../src/domain/pod.ts"
import { formatIP, parseIP } from "../../src/domain/ip.ts"
import { secondaryIPs } from "./invariants.ts"
import { parsePool, reservationName } from "../../src/domain/pool.ts"
import type { NodeSlicePoolRecord } from "../../src/domain/node-slices.ts"
import type { NodeRecord } from "../../src/domain/never-runs-again.ts"
import {
  Caches,
  type CachesShape,
  PODREF_INDEX,
  toNadRecord,
  toPoolRecord,
  toReservationRecord
} from "../../src/services/Caches.ts"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import { type MemoryClusterState, makeMemoryKubeApi } from "../../src/testing/InMemoryCluster.ts"
import type { Informer } from "../../src/services/Informer.ts"
import * as Metrics from "../../src/services/Metrics.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as NadConfigs from "../../src/services/NadConfigs.ts"
import * as R from "../../src/services/resources.ts"
import type { Resource } from "../../src/services/resources.ts"
import { type ApiCallInfo, type HookSlots, hooked } from "./hooks.ts"
import { simulationStores } from "../../src/testing/layers.ts"
import { nadObject, whereaboutsConfig } from "./objects.ts"

export const POOL_NS = "kube-system"

/** An informer over a fixed snapshot, replaced by `set`. */
const snapshotInformer = <A>(resource: Resource, keyOf: (a: A) => string, indexers: Readonly<Record<string, (a: A) => ReadonlyArray<string>>> = {}) => {
  let items = new Map<string, A>()
  let indexes = new Map<string, Map<string, Array<A>>>()
  let changes = 0
  const informer: Informer<A> = {
    resource,
    awaitSynced: Effect.void,
    isSynced: Effect.succeed(true),
    get: (key) => Option.fromNullable(items.get(key)),
    values: () => [...items.values()],
    get byKey() {
      return items
    },
    byIndex: (name, value) => indexes.get(name)?.get(value) ?? [],
    subscribe: Effect.dieMessage("snapshot informers publish no events"),
    subscribeRelists: Effect.dieMessage("snapshot informers never relist"),
    restarts: () => 0,
    changes: () => changes
  }
  const set = (list: ReadonlyArray<A>) => {
    changes++
    items = new Map(list.map((a) => [keyOf(a), a] as const))
    indexes = new Map()
    for (const [name, fn] of Object.entries(indexers)) {
      const idx = new Map<string, Array<A>>()
      for (const a of list) for (const v of new Set(fn(a))) idx.set(v, [...(idx.get(v) ?? []), a])
      indexes.set(name, idx)
    }
  }
  return { informer, set }
}

/** Caches that show the cluster as it was at the last `refresh()`. */
export const snapshotCaches = (state: MemoryClusterState) => {
  const pods = snapshotInformer<PodProjection>(R.Pods, (p) => `${p.namespace}/${p.name}`)
  const nads = snapshotInformer(R.NetworkAttachmentDefinitions, (n: ReturnType<typeof toNadRecord>) => `${n.namespace}/${n.name}`)
  const pools = snapshotInformer(R.IPPools, (p: ReturnType<typeof toPoolRecord>) => p.name, {
    [PODREF_INDEX]: (p) => p.pool.entries.map((e) => e.podref)
  })
  const reservations = snapshotInformer(R.OverlappingRangeIPReservations, (r: ReturnType<typeof toReservationRecord>) => r.name, {
    [PODREF_INDEX]: (r) => [r.podref]
  })
  const refresh = () => {
    pods.set(state.snapshot(R.Pods).map(projectPod))
    nads.set(state.snapshot(R.NetworkAttachmentDefinitions).map(toNadRecord))
    pools.set(state.snapshot(R.IPPools, POOL_NS).map(toPoolRecord))
    reservations.set(state.snapshot(R.OverlappingRangeIPReservations, POOL_NS).map(toReservationRecord))
  }
  const caches: CachesShape = {
    pods: pods.informer,
    nads: nads.informer,
    pools: pools.informer,
    reservations: reservations.informer,
    nodeSlicePools: snapshotInformer(R.NodeSlicePools, (p: NodeSlicePoolRecord) => p.name).informer,
    nodes: snapshotInformer(R.Nodes, (n: NodeRecord) => n.name).informer,
    scheduleConfigMap: undefined,
    awaitSynced: Effect.void,
    isSynced: Effect.succeed(true)
  }
  return { caches, refresh }
}

/** Calls on these resources wait for the scheduler; NAD reads and Events do not matter to the race. */
const SCHEDULED = new Set(["pods", "ippools", "overlappingrangeipreservations"])

/** The environment of one interleaving run. */
export const interleavingWorld = (state: MemoryClusterState, slots: HookSlots, caches: CachesShape) =>
  Layer.mergeAll(simulationStores).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        Layer.succeed(KubeApi, hooked(makeMemoryKubeApi(state), slots)),
        ControllerConfig.layerWith({ namespace: POOL_NS }),
        NadConfigs.layerMemory(),
        Metrics.layer,
        Layer.succeed(Caches, caches)
      )
    )
  )

/** Creates a whereabouts NAD directly in the state (setup, not part of the race). */
export const seedNad = (state: MemoryClusterState, namespace: string, name: string, ipam: Record<string, unknown>) => {
  const out = state.create(R.NetworkAttachmentDefinitions, namespace, nadObject(namespace, name, whereaboutsConfig(ipam, name)))
  if (!("metadata" in out)) throw new Error(`seeding NAD failed: ${String(out)}`)
}

/**
 * Where a live pod's status IPs stand: each must be allocated to it and to nobody else, and (with
 * `reservations`) reserved for it.
 */
export const violations = (
  state: MemoryClusterState,
  pool: string,
  namespace: string,
  exempt: ReadonlySet<string>,
  options: { readonly reservations: boolean }
): Array<string> => {
  const raw = state.snapshot(R.IPPools, POOL_NS).find((p) => p.metadata.name === pool)
  const spec = (raw?.["spec"] ?? { range: "", allocations: {} }) as { range: string; allocations: Record<string, unknown> }
  const entries = new Map(parsePool({ metadata: { name: pool }, spec }).entries.map((e) => [formatIP(e.ip), e] as const))
  const reservations = new Map(
    state.snapshot(R.OverlappingRangeIPReservations, POOL_NS).map((r) => [r.metadata.name, (r["spec"] as { podref: string }).podref] as const)
  )
  const out: Array<string> = []
  const owners = new Map<string, string>()
  for (const p of state.snapshot(R.Pods, namespace)) {
    const ref = `${namespace}/${p.metadata.name}`
    if (exempt.has(ref)) continue
    for (const ip of secondaryIPs(p)) {
      const other = owners.get(ip)
      if (other !== undefined) out.push(`${ip} handed to two live pods: ${other} and ${ref}`)
      owners.set(ip, ref)
      const entry = entries.get(ip)
      if (entry?.podref !== ref) out.push(`live pod ${ref} lost ${ip} in the pool (now ${entry?.podref ?? "free"})`)
      const parsed = parseIP(ip)
      if (options.reservations && parsed !== undefined && reservations.get(reservationName(parsed, "")) !== ref) {
        out.push(`live pod ${ref} lost the reservation of ${ip} (now ${reservations.get(reservationName(parsed, "")) ?? "none"})`)
      }
    }
  }
  return out
}

/** What remains of dead pods once everything settled: pool entries and reservations of pods that do not exist. */
export const leftovers = (state: MemoryClusterState, pool: string, namespace: string): Array<string> => {
  const live = new Set(state.snapshot(R.Pods, namespace).map((p) => `${namespace}/${p.metadata.name}`))
  const raw = state.snapshot(R.IPPools, POOL_NS).find((p) => p.metadata.name === pool)
  const spec = (raw?.["spec"] ?? { range: "", allocations: {} }) as { range: string; allocations: Record<string, unknown> }
  const out: Array<string> = []
  for (const e of parsePool({ metadata: { name: pool }, spec }).entries) if (!live.has(e.podref)) out.push(`pool still holds ${formatIP(e.ip)} for dead ${e.podref}`)
  for (const r of state.snapshot(R.OverlappingRangeIPReservations, POOL_NS)) {
    const ref = (r["spec"] as { podref: string }).podref
    if (!live.has(ref)) out.push(`reservation ${r.metadata.name} still held for dead ${ref}`)
  }
  return out
}

export const isScheduled = (call: ApiCallInfo): boolean => SCHEDULED.has(call.resource)

