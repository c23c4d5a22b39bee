/** API objects for tests, valid for the in-memory cluster and a real API server alike. */
import type { KubeObject } from "../../src/services/KubeApi.ts"
import type { Attachment } from "../../src/testing/cni-plugin.ts"
import { NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION } from "../../src/domain/multus.ts"

export interface StatusEntry {
  readonly name: string
  readonly interface?: string
  readonly ips?: ReadonlyArray<string>
  readonly default?: boolean
}

export const networkStatus = (entries: ReadonlyArray<StatusEntry>): string => JSON.stringify(entries)

/**
 * What a test pod attaches to, as Multus' networks annotation names it: `name` (in the namespace
 * "default") or `namespace/name`, on interface `ifname` (`net<n>`, so a NAD name given in its
 * place does not compile).
 */
export const on = (network: string, ifname: `net${number}` = "net1"): Attachment => {
  const slash = network.indexOf("/")
  return { nad: slash < 0 ? { namespace: "default", name: network } : { namespace: network.slice(0, slash), name: network.slice(slash + 1) }, ifname }
}

/** One entry of a pod's network-status: `ips` listed for NAD `network` (in "default") on `iface`. */
export const listing = (network: string, ips: ReadonlyArray<string>, iface = "net1") => ({ name: `default/${network}`, interface: iface, ips })

export const podObject = (
  namespace: string,
  name: string,
  options: { readonly status?: string; readonly networks?: string; readonly nodeName?: string; readonly annotations?: Record<string, string> } = {}
): KubeObject => {
  const annotations: Record<string, string> = { ...options.annotations }
  if (options.status !== undefined) annotations[NETWORK_STATUS_ANNOTATION] = options.status
  if (options.networks !== undefined) annotations[NETWORKS_ANNOTATION] = options.networks
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, annotations },
    spec: {
      ...(options.nodeName === undefined ? {} : { nodeName: options.nodeName }),
      containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }]
    }
  }
}

export const whereaboutsConfig = (ipam: Record<string, unknown>, name = "net"): string =>
  JSON.stringify({ cniVersion: "0.3.1", name, type: "macvlan", master: "eth0", ipam: { type: "whereabouts", ...ipam } })

export const nadObject = (namespace: string, name: string, config: string): KubeObject => ({
  apiVersion: "k8s.cni.cncf.io/v1",
  kind: "NetworkAttachmentDefinition",
  metadata: { name, namespace },
  spec: { config }
})

export const poolObject = (namespace: string, name: string, range: string, allocations: Record<string, { id: string; podref: string; ifname?: string }> = {}): KubeObject => ({
  apiVersion: "whereabouts.cni.cncf.io/v1alpha1",
  kind: "IPPool",
  metadata: { name, namespace },
  spec: { range, allocations }
})

export const namespaceObject = (name: string): KubeObject => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } })

/** A Node with its Ready condition and taints, as the kubelet and the node lifecycle controller write them. */
export const nodeObject = (
  name: string,
  options: { readonly ready?: "True" | "False" | "Unknown"; readonly readySince?: string; readonly taints?: ReadonlyArray<{ readonly key: string; readonly effect: string }> } = {}
): KubeObject => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name },
  spec: options.taints === undefined ? {} : { taints: options.taints },
  status: { conditions: [{ type: "Ready", status: options.ready ?? "True", lastTransitionTime: options.readySince ?? "2026-01-01T00:00:00Z", reason: "KubeletReady" }] }
})
