/**
 * The controller's informers: pods (as small projections), NetworkAttachmentDefinitions,
 * IPPools and OverlappingRangeIPReservations (both indexed by podref, so the allocations of one
 * pod are found without scanning every pool), and NodeSlicePools (optional: whereabouts before
 * 0.8 has no such CRD).
 */
import { Context, Effect, Layer, Option, type Scope, Stream } from "effect"
import { intern } from "../domain/intern.ts"
import { type NodeRecord, OUT_OF_SERVICE_TAINT } from "../domain/never-runs-again.ts"
import type { NodeSlicePoolRecord } from "../domain/node-slices.ts"
import { type ParsedPool, type ReservationRecord, parsePool } from "../domain/pool.ts"
import { listedIPKeys } from "../domain/claims.ts"
import { type PodProjection, podRef, projectPod } from "../domain/pod.ts"
import { ControllerConfig } from "./ControllerConfig.ts"
import { type Informer, makeInformer } from "./Informer.ts"
import { KubeApi, type KubeObject } from "./KubeApi.ts"
import * as R from "./resources.ts"

export interface NadRecord {
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly resourceVersion: string | undefined
  /** spec.config; undefined or "" when the config lives on the nodes. */
  readonly config: string | undefined
}

/** A ConfigMap, as the schedule source reads it. */
export interface ConfigMapRecord {
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly resourceVersion: string | undefined
  readonly data: Readonly<Record<string, string>>
}

export const toConfigMapRecord = (o: KubeObject): ConfigMapRecord => {
  const data = typeof o["data"] === "object" && o["data"] !== null ? (o["data"] as Record<string, unknown>) : {}
  return {
    namespace: o.metadata.namespace ?? "",
    name: o.metadata.name,
    uid: o.metadata.uid ?? "",
    resourceVersion: o.metadata.resourceVersion,
    data: Object.fromEntries(Object.entries(data).flatMap(([k, v]) => (typeof v === "string" ? [[k, v] as const] : [])))
  }
}

export interface PoolRecord {
  readonly name: string
  readonly uid: string
  readonly resourceVersion: string | undefined
  readonly pool: ParsedPool
}

export type { NodeRecord, NodeSlicePoolRecord, ReservationRecord }

export const PODREF_INDEX = "podref"
/** Pods by the node they run on. */
export const NODE_INDEX = "node"
/** Pods by the addresses their network-status lists (ipKey): who else holds an address (claims.ts). */
export const LISTED_IP_INDEX = "listedIP"

const str = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)
const specOf = (o: KubeObject): Record<string, unknown> =>
  typeof o["spec"] === "object" && o["spec"] !== null ? (o["spec"] as Record<string, unknown>) : {}

export const toNadRecord = (o: KubeObject): NadRecord => ({
  namespace: o.metadata.namespace ?? "",
  name: o.metadata.name,
  uid: o.metadata.uid ?? "",
  resourceVersion: o.metadata.resourceVersion,
  config: str(specOf(o)["config"])
})

/** Total: a pool whose spec is unreadable becomes a pool with no entries and every key reported. */
export const toPoolRecord = (o: KubeObject): PoolRecord => updatePoolRecord(o, undefined)

/** toPoolRecord, with the unchanged entries taken from the cached version (see parsePool). */
export const updatePoolRecord = (o: KubeObject, previous: PoolRecord | undefined): PoolRecord => {
  const spec = specOf(o)
  const allocations = typeof spec["allocations"] === "object" && spec["allocations"] !== null ? (spec["allocations"] as Record<string, unknown>) : {}
  return {
    name: o.metadata.name,
    uid: o.metadata.uid ?? "",
    resourceVersion: o.metadata.resourceVersion,
    pool: parsePool({ metadata: { name: o.metadata.name }, spec: { range: str(spec["range"]) ?? "", allocations } }, previous?.pool)
  }
}

export const toReservationRecord = (o: KubeObject): ReservationRecord => {
  const spec = specOf(o)
  return {
    name: o.metadata.name,
    resourceVersion: o.metadata.resourceVersion,
    podref: intern(str(spec["podref"]) ?? "")
  }
}

/** A NodeSlicePool as the planner reads it; unreadable fields become empty (nothing is then mapped through it). */
export const toNodeSlicePoolRecord = (o: KubeObject): NodeSlicePoolRecord => {
  const spec = specOf(o)
  const status = typeof o["status"] === "object" && o["status"] !== null ? (o["status"] as Record<string, unknown>) : {}
  const allocations = Array.isArray(status["allocations"]) ? (status["allocations"] as Array<unknown>) : []
  return {
    name: o.metadata.name,
    resourceVersion: o.metadata.resourceVersion,
    range: str(spec["range"]) ?? "",
    sliceSize: str(spec["sliceSize"]) ?? "",
    allocations: allocations.flatMap((a) => {
      const r = typeof a === "object" && a !== null ? (a as Record<string, unknown>) : {}
      const sliceRange = str(r["sliceRange"])
      return sliceRange === undefined ? [] : [{ nodeName: intern(str(r["nodeName"]) ?? ""), sliceRange }]
    })
  }
}

/** What the never-run-again rule needs of a Node: its Ready condition and whether it is declared out of service. */
export const toNodeRecord = (o: KubeObject): NodeRecord => {
  const status = typeof o["status"] === "object" && o["status"] !== null ? (o["status"] as Record<string, unknown>) : {}
  const conditions = Array.isArray(status["conditions"]) ? (status["conditions"] as Array<Record<string, unknown>>) : []
  const ready = conditions.find((c) => typeof c === "object" && c !== null && c["type"] === "Ready")
  const taints = Array.isArray(specOf(o)["taints"]) ? (specOf(o)["taints"] as Array<Record<string, unknown>>) : []
  return {
    name: o.metadata.name,
    resourceVersion: o.metadata.resourceVersion,
    ready: ready === undefined ? undefined : str(ready["status"]),
    readySince: ready === undefined ? undefined : str(ready["lastTransitionTime"]),
    outOfService: taints.some((t) => typeof t === "object" && t !== null && t["key"] === OUT_OF_SERVICE_TAINT)
  }
}

/** How often a cluster without the NodeSlicePool CRD (whereabouts before 0.8) is looked at again. */
export const ABSENT_RESOURCE_RETRY = "1 minute"

export interface CachesShape {
  readonly pods: Informer<PodProjection>
  readonly nads: Informer<NadRecord>
  readonly pools: Informer<PoolRecord>
  readonly reservations: Informer<ReservationRecord>
  readonly nodeSlicePools: Informer<NodeSlicePoolRecord>
  readonly nodes: Informer<NodeRecord>
  /** The ConfigMap holding the sweep's schedule (`--reconcile-schedule-configmap`; watched by name only); undefined when off. */
  readonly scheduleConfigMap: Informer<ConfigMapRecord> | undefined
  readonly awaitSynced: Effect.Effect<void>
  readonly isSynced: Effect.Effect<boolean>
  /** Deleted pods from now on (watch deletions and those a relist discovers). */
  readonly podDeletions: Effect.Effect<Stream.Stream<PodProjection>, never, Scope.Scope>
}

export class Caches extends Context.Tag("whereabouts-controller/Caches")<Caches, CachesShape>() {}

const nsName = (a: { readonly namespace: string; readonly name: string }) => `${a.namespace}/${a.name}`

const podInformer = (pageSize: number) =>
  makeInformer<PodProjection>({
    resource: R.Pods,
    transform: projectPod,
    // The cache's key is the podref pool entries and reservations hold: one shared copy.
    keyOf: (p) => intern(podRef(p)),
    identityOf: (p) => p.uid,
    versionOf: (p) => p.resourceVersion,
    indexers: { [NODE_INDEX]: (p) => (p.nodeName === undefined ? [] : [p.nodeName]), [LISTED_IP_INDEX]: listedIPKeys },
    pageSize
  })

/** IPPools, indexed by podref; a changed pool reuses its cached version's unchanged entries (updatePoolRecord). */
const poolInformer = (namespace: string, pageSize: number) =>
  Effect.gen(function* () {
    let cachedPool: (name: string) => PoolRecord | undefined = () => undefined
    const pools: Informer<PoolRecord> = yield* makeInformer<PoolRecord>({
      resource: R.IPPools,
      namespace,
      transform: (o) => updatePoolRecord(o, cachedPool(o.metadata.name)),
      keyOf: (p) => p.name,
      versionOf: (p) => p.resourceVersion,
      indexers: { [PODREF_INDEX]: (p) => [...new Set(p.pool.entries.map((e) => e.podref))] },
      pageSize
    })
    cachedPool = (name) => Option.getOrUndefined(pools.get(name))
    return pools
  })

/** One ConfigMap, watched by name. */
const configMapInformer = (namespace: string, name: string, pageSize: number) =>
  makeInformer<ConfigMapRecord>({
    resource: R.ConfigMaps,
    namespace,
    fieldSelector: `metadata.name=${name}`,
    transform: toConfigMapRecord,
    keyOf: (c) => c.name,
    versionOf: (c) => c.resourceVersion,
    pageSize
  })

/** Starts the informers for the lifetime of the layer. */
export const layer: Layer.Layer<Caches, never, KubeApi | ControllerConfig> = Layer.scoped(
  Caches,
  Effect.gen(function* () {
    const config = yield* ControllerConfig
    const pageSize = config.pageSize
    // Registered first, so it runs once every informer below has stopped (a shutdown's progress).
    yield* Effect.addFinalizer(() => Effect.logInfo("informers stopped"))
    const pods = yield* podInformer(pageSize)
    const nads = yield* makeInformer<NadRecord>({
      resource: R.NetworkAttachmentDefinitions,
      transform: toNadRecord,
      keyOf: nsName,
      versionOf: (n) => n.resourceVersion,
      pageSize
    })
    const pools = yield* poolInformer(config.namespace, pageSize)
    const reservations = yield* makeInformer<ReservationRecord>({
      resource: R.OverlappingRangeIPReservations,
      namespace: config.namespace,
      transform: toReservationRecord,
      keyOf: (r) => r.name,
      versionOf: (r) => r.resourceVersion,
      indexers: { [PODREF_INDEX]: (r) => [r.podref] },
      pageSize
    })
    const nodeSlicePools = yield* makeInformer<NodeSlicePoolRecord>({
      resource: R.NodeSlicePools,
      namespace: config.namespace,
      transform: toNodeSlicePoolRecord,
      keyOf: (p) => p.name,
      versionOf: (p) => p.resourceVersion,
      pageSize,
      optional: { absentRetry: ABSENT_RESOURCE_RETRY }
    })
    const nodes = yield* makeInformer<NodeRecord>({
      resource: R.Nodes,
      transform: toNodeRecord,
      keyOf: (n) => n.name,
      versionOf: (n) => n.resourceVersion,
      pageSize
    })
    const scheduleConfigMap = config.scheduleConfigMap === "" ? undefined : yield* configMapInformer(config.namespace, config.scheduleConfigMap, pageSize)
    const all = [pods, nads, pools, reservations, nodeSlicePools, nodes, ...(scheduleConfigMap === undefined ? [] : [scheduleConfigMap])] as const
    return {
      scheduleConfigMap,
      pods,
      nads,
      pools,
      reservations,
      nodeSlicePools,
      nodes,
      awaitSynced: Effect.forEach(all, (i) => i.awaitSynced, { discard: true, concurrency: "unbounded" }),
      isSynced: Effect.map(Effect.forEach(all, (i) => i.isSynced), (done) => done.every(Boolean)),
      podDeletions: Effect.map(pods.subscribe, (queue) =>
        Stream.fromQueue(queue).pipe(Stream.filterMap((e) => (e.type === "delete" ? Option.some(e.object) : Option.none())))
      )
    }
  })
)
