/**
 * The soak's networks, one NAD each, covering what whereabouts 0.9 writes: unnamed IPv4 and IPv6,
 * dual stack, a named network on the unnamed IPv4 CIDR, two node-slice networks, a small range for
 * the StatefulSet (addresses reused at once), and one whose NAD is edited and deleted under its
 * pods. Ranges are disjoint except where sharing is the point.
 */
import { whereaboutsConfig } from "../../test/support/objects.ts"

export const POOLS_NAMESPACE = "kube-system"
export const NAMESPACES = ["soak-a", "soak-b"] as const

export interface Net {
  /** `ns/name` of the NAD; also the network-status entry's name. */
  readonly key: string
  readonly namespace: string
  readonly nad: string
  /** network_name ("" when unnamed): the reservation names' and pools' prefix. */
  readonly networkName: string
  /** The IPAM object's variants: the first is the NAD as created; edits cycle through the rest. */
  readonly ipam: ReadonlyArray<Record<string, unknown>>
  /** node_slice_size, when the network is sliced per node. */
  readonly sliceSize?: string
  /** Share of plain pods attached to it. */
  readonly weight: number
  /** Edited and deleted by the workload. */
  readonly mutable?: boolean
}

const net = (namespace: string, nad: string, rest: Omit<Net, "key" | "namespace" | "nad">): Net => ({ key: `${namespace}/${nad}`, namespace, nad, ...rest })

export const NETS: ReadonlyArray<Net> = [
  net("soak-a", "v4", { networkName: "", ipam: [{ range: "10.50.0.0/20" }], weight: 3 }),
  net("soak-a", "v6", { networkName: "", ipam: [{ range: "fd00:50::/112" }], weight: 2 }),
  net("soak-b", "dual", { networkName: "", ipam: [{ ipRanges: [{ range: "10.51.0.0/20" }, { range: "fd00:51::/112" }] }], weight: 2 }),
  net("soak-b", "blue", { networkName: "blue", ipam: [{ range: "10.50.0.0/20", network_name: "blue" }], weight: 2 }),
  net("soak-a", "slices", { networkName: "", sliceSize: "/22", ipam: [{ range: "10.52.0.0/16", node_slice_size: "/22" }], weight: 3 }),
  net("soak-b", "green", { networkName: "green", sliceSize: "/22", ipam: [{ range: "10.53.0.0/16", node_slice_size: "/22", network_name: "green" }], weight: 2 }),
  net("soak-a", "flex", {
    networkName: "",
    mutable: true,
    weight: 2,
    ipam: [
      { range: "10.54.0.0/22" },
      { range: "10.54.0.0/22", exclude: ["10.54.0.0/28"] },
      { range: "10.54.0.0/22", range_end: "10.54.1.254" },
      // Wider: a new pool; the pods of the old one keep their entries there, reservations keep them apart.
      { range: "10.54.0.0/21" }
    ]
  })
]

/** The StatefulSet's network: a /27, so a reborn replica's address is the one just given up. */
export const STS_NET: Net = net("soak-b", "tiny", { networkName: "", ipam: [{ range: "10.55.0.0/27" }], weight: 0 })

export const ALL_NETS: ReadonlyArray<Net> = [...NETS, STS_NET]

export const netByKey = (key: string): Net | undefined => ALL_NETS.find((n) => n.key === key)

/** The NAD's spec.config for one IPAM variant (a macvlan plugin, as most users write it). */
export const nadConfig = (n: Net, variant = 0): string =>
  whereaboutsConfig(n.ipam[variant % n.ipam.length]!, n.nad)

/** The network a pool belongs to (its network_name, "" for unnamed), from its name. */
export const networkOfPool = (pool: string): string => {
  for (const n of ALL_NETS) if (n.networkName !== "" && pool.startsWith(`${n.networkName}-`)) return n.networkName
  return ""
}

/** Node names: the kubelet side keeps one plugin configuration per node. */
export const nodeName = (i: number): string => `soak-node-${i}`
