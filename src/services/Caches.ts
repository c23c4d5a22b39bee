/** The controller's informers; pools and reservations are indexed by podref, so one pod's allocations are found without scanning every pool. */
import { Context, Effect, Layer, Option } from "effect"
import { intern } from "../domain/intern.ts"
import { type NodeRecord, OUT_OF_SERVICE_TAINT } from "../domain/never-runs-again.ts"
import type { NodeSlicePoolRecord } from "../domain/node-slices.ts"
import { type ParsedPool, type ReservationRecord, parsePool } from "../domain/pool.ts"
import { listedIPKeys } from "../domain/claims.ts"
import { list, record } from "../domain/json.ts"
import { type PodProjection, podRef, projectPod } from "../domain/pod.ts"
import { ControllerConfig } from "./ControllerConfig.ts"
import { type Informer, type InformerOptions, makeInformer } from "./Informer.ts"
import { KubeApi, type KubeObject } from "./KubeApi.ts"
import * as R from "./resources.ts"

/** Who an object is: namespace ("" when cluster-scoped), name, uid ("" when unknown) and resourceVersion. */
interface ObjectRecord {
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly resourceVersion: string | undefined
}

export interface NadRecord extends ObjectRecord {
  /** spec.config; undefined or "" when the config lives on the nodes. */
  readonly config: string | undefined
}

/** A ConfigMap, as the schedule source reads it. */
export interface ConfigMapRecord extends ObjectRecord {
  readonly data: Readonly<Record<string, string>>
}

export interface PoolRecord extends Omit<ObjectRecord, "namespace"> {
  readonly pool: ParsedPool
}

export type { NodeRecord, NodeSlicePoolRecord, ReservationRecord }

export const PODREF_INDEX = "podref"
/** Pods by the node they run on. */
export const NODE_INDEX = "node"
/** Pods by the addresses their network-status lists (ipKey): who else holds an address (claims.ts). */
export const LISTED_IP_INDEX = "listedIP"

const str = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)
const objectRecord = ({ metadata }: KubeObject): ObjectRecord => ({
  namespace: metadata.namespace ?? "",
  name: metadata.name,
  uid: metadata.uid ?? "",
  resourceVersion: metadata.resourceVersion
})

export const toConfigMapRecord = (o: KubeObject): ConfigMapRecord => ({
  ...objectRecord(o),
  data: Object.fromEntries(Object.entries(record(o["data"])).flatMap(([k, v]) => (typeof v === "string" ? [[k, v] as const] : [])))
})

export const toNadRecord = (o: KubeObject): NadRecord => ({ ...objectRecord(o), config: str(record(o["spec"])["config"]) })

/** Total: a pool whose spec is unreadable becomes a pool with no entries and every key reported. */
export const toPoolRecord = (o: KubeObject): PoolRecord => updatePoolRecord(o, undefined)

/** toPoolRecord, with the unchanged entries taken from the cached version (see parsePool). */
const updatePoolRecord = (o: KubeObject, previous: PoolRecord | undefined): PoolRecord => {
  const spec = record(o["spec"])
  return {
    name: o.metadata.name,
    uid: o.metadata.uid ?? "",
    resourceVersion: o.metadata.resourceVersion,
    pool: parsePool({ metadata: { name: o.metadata.name }, spec: { range: str(spec["range"]) ?? "", allocations: record(spec["allocations"]) } }, previous?.pool)
  }
}

export const toReservationRecord = (o: KubeObject): ReservationRecord => ({
  name: o.metadata.name,
  resourceVersion: o.metadata.resourceVersion,
  podref: intern(str(record(o["spec"])["podref"]) ?? "")
})

/** A NodeSlicePool as the planner reads it; unreadable fields become empty (nothing is then mapped through it). */
export const toNodeSlicePoolRecord = (o: KubeObject): NodeSlicePoolRecord => {
  const spec = record(o["spec"])
  return {
    name: o.metadata.name,
    resourceVersion: o.metadata.resourceVersion,
    range: str(spec["range"]) ?? "",
    sliceSize: str(spec["sliceSize"]) ?? "",
    allocations: list(record(o["status"])["allocations"]).flatMap((a) => {
      const sliceRange = str(record(a)["sliceRange"])
      return sliceRange === undefined ? [] : [{ nodeName: intern(str(record(a)["nodeName"]) ?? ""), sliceRange }]
    })
  }
}

/** What the never-run-again rule needs of a Node: its Ready condition and whether it is declared out of service. */
export const toNodeRecord = (o: KubeObject): NodeRecord => {
  const ready = list(record(o["status"])["conditions"]).map(record).find((c) => c["type"] === "Ready")
  return {
    name: o.metadata.name,
    resourceVersion: o.metadata.resourceVersion,
    ready: ready === undefined ? undefined : str(ready["status"]),
    readySince: ready === undefined ? undefined : str(ready["lastTransitionTime"]),
    outOfService: list(record(o["spec"])["taints"]).some((t) => record(t)["key"] === OUT_OF_SERVICE_TAINT)
  }
}

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
}

export class Caches extends Context.Tag("whereabouts-controller/Caches")<Caches, CachesShape>() {}

/** Starts the informers for the lifetime of the layer. */
export const layer: Layer.Layer<Caches, never, KubeApi | ControllerConfig> = Layer.scoped(
  Caches,
  Effect.gen(function* () {
    const { namespace, pageSize, reservationPageSize, scheduleConfigMap: configMapName } = yield* ControllerConfig
    // Registered first, so it runs once every informer below has stopped (a shutdown's progress).
    yield* Effect.addFinalizer(() => Effect.logInfo("informers stopped"))
    /** An informer of records keyed by name unless told otherwise. */
    const informer = <A extends { readonly name: string; readonly resourceVersion?: string | undefined }>(
      options: Omit<InformerOptions<A>, "keyOf" | "versionOf"> & Partial<Pick<InformerOptions<A>, "keyOf">>
    ) => makeInformer<A>({ keyOf: (a) => a.name, versionOf: (a) => a.resourceVersion, pageSize, ...options })
    const pods = yield* informer<PodProjection>({
      resource: R.Pods,
      transform: projectPod,
      // The cache's key is the podref pool entries and reservations hold: one shared copy.
      keyOf: (p) => intern(podRef(p)),
      identityOf: (p) => p.uid,
      indexers: { [NODE_INDEX]: (p) => (p.nodeName === undefined ? [] : [p.nodeName]), [LISTED_IP_INDEX]: listedIPKeys }
    })
    const nads = yield* informer<NadRecord>({
      resource: R.NetworkAttachmentDefinitions,
      transform: toNadRecord,
      keyOf: (n) => `${n.namespace}/${n.name}`
    })
    // A changed pool reuses its cached version's unchanged entries (updatePoolRecord).
    let cachedPool: (name: string) => PoolRecord | undefined = () => undefined
    const pools = yield* informer<PoolRecord>({
      resource: R.IPPools,
      namespace,
      transform: (o) => updatePoolRecord(o, cachedPool(o.metadata.name)),
      indexers: { [PODREF_INDEX]: (p) => [...new Set(p.pool.entries.map((e) => e.podref))] }
    })
    cachedPool = (name) => Option.getOrUndefined(pools.get(name))
    const reservations = yield* informer<ReservationRecord>({
      resource: R.OverlappingRangeIPReservations,
      namespace,
      transform: toReservationRecord,
      pageSize: reservationPageSize,
      indexers: { [PODREF_INDEX]: (r) => [r.podref] }
    })
    const nodeSlicePools = yield* informer<NodeSlicePoolRecord>({
      resource: R.NodeSlicePools,
      namespace,
      transform: toNodeSlicePoolRecord,
      // whereabouts before 0.8 has no NodeSlicePool CRD.
      optional: true
    })
    const nodes = yield* informer<NodeRecord>({ resource: R.Nodes, transform: toNodeRecord })
    const scheduleConfigMap = configMapName === ""
      ? undefined
      : yield* informer<ConfigMapRecord>({ resource: R.ConfigMaps, namespace, fieldSelector: `metadata.name=${configMapName}`, transform: toConfigMapRecord })
    const informers = { pods, nads, pools, reservations, nodeSlicePools, nodes, scheduleConfigMap }
    const all = Object.values(informers).filter((i) => i !== undefined)
    return {
      ...informers,
      awaitSynced: Effect.forEach(all, (i) => i.awaitSynced, { discard: true, concurrency: "unbounded" }),
      isSynced: Effect.map(Effect.forEach(all, (i) => i.isSynced), (done) => done.every(Boolean))
    }
  })
)
