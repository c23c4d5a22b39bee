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

export const Pods: Resource = { group: "", version: "v1", plural: "pods", kind: "Pod", namespaced: true }
export const Events: Resource = { group: "", version: "v1", plural: "events", kind: "Event", namespaced: true }
export const Leases: Resource = { group: "coordination.k8s.io", version: "v1", plural: "leases", kind: "Lease", namespaced: true }
export const NetworkAttachmentDefinitions: Resource = {
  group: "k8s.cni.cncf.io",
  version: "v1",
  plural: "network-attachment-definitions",
  kind: "NetworkAttachmentDefinition",
  namespaced: true
}
export const IPPools: Resource = {
  group: "whereabouts.cni.cncf.io",
  version: "v1alpha1",
  plural: "ippools",
  kind: "IPPool",
  namespaced: true
}
export const OverlappingRangeIPReservations: Resource = {
  group: "whereabouts.cni.cncf.io",
  version: "v1alpha1",
  plural: "overlappingrangeipreservations",
  kind: "OverlappingRangeIPReservation",
  namespaced: true
}
export const NodeSlicePools: Resource = {
  group: "whereabouts.cni.cncf.io",
  version: "v1alpha1",
  plural: "nodeslicepools",
  kind: "NodeSlicePool",
  namespaced: true
}
export const Nodes: Resource = { group: "", version: "v1", plural: "nodes", kind: "Node", namespaced: false }
export const ConfigMaps: Resource = { group: "", version: "v1", plural: "configmaps", kind: "ConfigMap", namespaced: true }
export const Namespaces: Resource = { group: "", version: "v1", plural: "namespaces", kind: "Namespace", namespaced: false }
