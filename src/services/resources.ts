/** The API resources the controller touches. */
export interface Resource {
  /** "" for the core group. */
  readonly group: string
  readonly version: string
  readonly plural: string
  readonly kind: string
  readonly namespaced: boolean
}

export const apiVersionOf = (r: Resource): string => (r.group === "" ? r.version : `${r.group}/${r.version}`)

/** REST path of a collection or object; `namespace` undefined lists across all namespaces. */
export const resourcePath = (r: Resource, namespace?: string, name?: string): string => {
  const prefix = r.group === "" ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`
  const ns = r.namespaced && namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : ""
  const obj = name === undefined ? "" : `/${encodeURIComponent(name)}`
  return `${prefix}${ns}/${r.plural}${obj}`
}

const core = (plural: string, kind: string, namespaced = true): Resource => ({ group: "", version: "v1", plural, kind, namespaced })
const whereabouts = (plural: string, kind: string): Resource => ({ group: "whereabouts.cni.cncf.io", version: "v1alpha1", plural, kind, namespaced: true })

export const Pods = core("pods", "Pod")
export const Events = core("events", "Event")
export const Nodes = core("nodes", "Node", false)
export const ConfigMaps = core("configmaps", "ConfigMap")
export const Namespaces = core("namespaces", "Namespace", false)
export const Leases: Resource = { group: "coordination.k8s.io", version: "v1", plural: "leases", kind: "Lease", namespaced: true }
export const NetworkAttachmentDefinitions: Resource =
  { group: "k8s.cni.cncf.io", version: "v1", plural: "network-attachment-definitions", kind: "NetworkAttachmentDefinition", namespaced: true }
export const IPPools = whereabouts("ippools", "IPPool")
export const OverlappingRangeIPReservations = whereabouts("overlappingrangeipreservations", "OverlappingRangeIPReservation")
export const NodeSlicePools = whereabouts("nodeslicepools", "NodeSlicePool")
