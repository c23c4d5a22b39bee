/**
 * Node-slice pools (whereabouts 0.8+): a network with `node_slice_size` is split into per-node
 * slices, recorded by upstream's node-slice controller in a NodeSlicePool named after the network's
 * `network_name`, else its config's `name`. The plugin writes one IPPool per node, named
 * `[<network_name>-]<node>-<slice>`, whose range is the slice; reservations keep their usual names.
 * This module tells which network, node and slice any pool belongs to: from the NodeSlicePools, or
 * by its name for a slice no node owns any more or a NodeSlicePool that is gone.
 */
import { type Cidr, cidrContains, networkOf, parseCidr } from "./ip.ts"
import type { IpamConfig } from "./ipam-config.ts"
import { type ParsedPool, normalizeRange, poolNetworkName } from "./pool.ts"

/** What the controller keeps of a NodeSlicePool. */
export interface NodeSlicePoolRecord {
  readonly name: string
  readonly resourceVersion: string | undefined
  /** The whole range the slices are cut from. */
  readonly range: string
  readonly sliceSize: string
  /** Each slice and the node that owns it ("" for a free slice). */
  readonly allocations: ReadonlyArray<{ readonly nodeName: string; readonly sliceRange: string }>
}

/** The IPPool name of a node's slice. */
export const slicePoolName = (slice: string, node: string, networkName: string): string =>
  networkName === "" ? `${node}-${normalizeRange(slice)}` : `${networkName}-${node}-${normalizeRange(slice)}`

/** The NodeSlicePool of a node-slice network: named after `network_name`, else the config's `name`. */
export const nodeSlicePoolName = (config: Pick<IpamConfig, "networkName" | "configName">): string => config.networkName || config.configName

/** The slice a node owns in a NodeSlicePool, if any. */
export const sliceOfNode = (pool: NodeSlicePoolRecord | undefined, node: string): string | undefined =>
  node === "" ? undefined : pool?.allocations.find((a) => a.nodeName === node)?.sliceRange

/**
 * Where a pool comes from: a whole range, with the network its name encodes ("" unnamed; undefined
 * when the name does not follow the convention), or a node's slice. A slice's `owner` is "current"
 * while its NodeSlicePool gives it to that node, "stale" when it does not (the node was deleted, the
 * slice went to another), "unknown" when the NodeSlicePool is gone.
 */
export type PoolOrigin =
  | { readonly _tag: "Range"; readonly network: string | undefined }
  | {
      readonly _tag: "Slice"
      readonly network: string
      readonly node: string
      readonly slice: string
      readonly nodeSlicePool: string
      readonly owner: "current" | "stale" | "unknown"
    }

/** A node-slice network, as its NADs declare it and its NodeSlicePool records it; `networkName` undefined when no NAD of it is known. */
interface SliceNetwork {
  readonly nodeSlicePool: string
  readonly networkName: string | undefined
  readonly range: Cidr | undefined
  readonly pool: NodeSlicePoolRecord | undefined
}

/** The node-slice networks: every NodeSlicePool, and every NAD config asking for node slices. */
export const sliceNetworks = (configs: Iterable<IpamConfig>, pools: Iterable<NodeSlicePoolRecord>): ReadonlyArray<SliceNetwork> => {
  const out = new Map<string, Omit<SliceNetwork, "nodeSlicePool">>()
  for (const pool of pools) out.set(pool.name, { networkName: undefined, range: parseCidr(pool.range), pool })
  for (const c of configs) {
    if (c.nodeSliceSize === undefined || c.ranges.length === 0) continue
    const name = nodeSlicePoolName(c)
    const known = out.get(name)
    out.set(name, { networkName: c.networkName, range: known?.range ?? c.ranges[0]!.cidr, pool: known?.pool })
  }
  return [...out].map(([nodeSlicePool, n]) => ({ nodeSlicePool, ...n }))
}

const within = (outer: Cidr | undefined, inner: Cidr | undefined): boolean =>
  outer !== undefined && inner !== undefined && inner.family === outer.family && inner.prefix >= outer.prefix && cidrContains(outer, { family: inner.family, value: networkOf(inner) })

/** Pool name → its slice, for every slice a NodeSlicePool gives to a node (both name forms when the network's naming is unknown). */
const currentSlices = (networks: ReadonlyArray<SliceNetwork>): ReadonlyMap<string, Extract<PoolOrigin, { _tag: "Slice" }>> => {
  const out = new Map<string, Extract<PoolOrigin, { _tag: "Slice" }>>()
  for (const n of networks) {
    for (const a of n.pool?.allocations ?? []) {
      if (a.nodeName === "") continue
      const forms = n.networkName === undefined ? ["", n.nodeSlicePool] : [n.networkName]
      for (const network of forms) {
        out.set(slicePoolName(a.sliceRange, a.nodeName, network), { _tag: "Slice", network, node: a.nodeName, slice: a.sliceRange, nodeSlicePool: n.nodeSlicePool, owner: "current" })
      }
    }
  }
  return out
}

/** A pool no current slice explains, read as `[<network>-]<node>-<slice>` of a node-slice network whose range holds it. */
const bySliceName = (pool: ParsedPool, networks: ReadonlyArray<SliceNetwork>): PoolOrigin | undefined => {
  const suffix = `-${normalizeRange(pool.range)}`
  if (!pool.name.endsWith(suffix) || pool.name.length === suffix.length) return undefined
  const prefix = pool.name.slice(0, -suffix.length)
  for (const n of networks) {
    if (!within(n.range, pool.cidr)) continue
    const named = n.networkName ?? (prefix.startsWith(`${n.nodeSlicePool}-`) ? n.nodeSlicePool : "")
    const node = named === "" ? prefix : prefix.startsWith(`${named}-`) ? prefix.slice(named.length + 1) : ""
    if (node === "") continue
    return { _tag: "Slice", network: named, node, slice: pool.range, nodeSlicePool: n.nodeSlicePool, owner: n.pool === undefined ? "unknown" : "stale" }
  }
  return undefined
}

/**
 * Tells where each pool comes from. `isRangePool` names the pools a NAD writes as whole ranges:
 * they are never read as slices, whatever their names look like.
 */
export const poolOrigins = (networks: ReadonlyArray<SliceNetwork>, isRangePool: (name: string) => boolean = () => false) => {
  const current = currentSlices(networks)
  return (pool: ParsedPool): PoolOrigin => {
    const slice = current.get(pool.name)
    if (slice !== undefined) return slice
    if (!isRangePool(pool.name)) {
      const stale = bySliceName(pool, networks)
      if (stale !== undefined) return stale
    }
    return { _tag: "Range", network: poolNetworkName(pool.name, pool.range) }
  }
}
