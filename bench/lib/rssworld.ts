/**
 * The standing worlds of the memory, sync and scale measurements: realistic pods with a kubelet's
 * status (written through pods/status) on the Ready Node objects they name: bench:apiserver's
 * steady world (`buildSteadyWorld`) and issue 47's cluster (`scaleLayout`), which `buildWorld` grows.
 */
import { Effect } from "effect"
import { KubeApi } from "../../src/services/KubeApi.ts"
import { adminRequest } from "../../test/live/cluster.ts"
import * as R from "../../src/services/resources.ts"
import type { BenchPlane } from "./controlplane.ts"
import { realisticStatus } from "./pods.ts"
import { type BulkPod, type Network, bulkStart, createNetworks, ignoreExists, networks, roundRobin } from "./world.ts"

/** An admin request (PATCH: a merge patch) that fails unless answered 200, 201 or 409 (exists). */
const call = (plane: BenchPlane, method: string, p: string, body: unknown) =>
  Effect.tryPromise({
    try: async () => {
      const res = await adminRequest(plane, method, p, body, { contentType: method === "PATCH" ? "application/merge-patch+json" : "application/json", timeoutMs: 300_000 })
      if (res.status !== 200 && res.status !== 201 && res.status !== 409) throw new Error(`${method} ${p}: HTTP ${res.status}`)
    },
    catch: (e) => e as Error
  })

/** PATCHes every pod's status subresource (`index` picks its realisticStatus), 16 at a time. */
const patchStatuses = (plane: BenchPlane, pods: ReadonlyArray<{ readonly namespace: string; readonly name: string; readonly index: number }>) =>
  Effect.forEach(pods, (p) => call(plane, "PATCH", `/api/v1/namespaces/${p.namespace}/pods/${p.name}/status`, { status: realisticStatus(p.index) }), { concurrency: 16, discard: true })

/** Nodes node-<from> … node-<to - 1> (the names the layouts give pods), each Ready through nodes/status, 16 at a time. */
export const createNodes = (plane: BenchPlane, from: number, to: number) =>
  Effect.forEach(
    Array.from({ length: to - from }, (_, k) => from + k),
    (i) => {
      const name = `node-${i}`
      // Addresses valid for any i below 32,768.
      const podCIDR = `10.${128 + (i >> 8)}.${i & 255}.0/24`
      const ip = `192.168.${i >> 8}.${i & 255}`
      const labels = { "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "bare-metal" }
      const now = new Date().toISOString()
      const conditions = ["MemoryPressure", "DiskPressure", "PIDPressure"].map((type) => ({ type, status: "False", lastHeartbeatTime: now, lastTransitionTime: now, reason: `KubeletHasNo${type}` }))
      conditions.push({ type: "Ready", status: "True", lastHeartbeatTime: now, lastTransitionTime: now, reason: "KubeletReady" })
      const capacity = { cpu: "64", memory: "263856280Ki", pods: "250", "ephemeral-storage": "1921724676Ki" }
      return Effect.zipRight(
        call(plane, "POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name, labels }, spec: { podCIDR } }),
        call(plane, "PATCH", `/api/v1/nodes/${name}/status`, { status: { conditions, capacity, allocatable: capacity, addresses: [{ type: "InternalIP", address: ip }, { type: "Hostname", address: name }] } })
      )
    },
    { concurrency: 16, discard: true }
  )

/** How many Node objects the steady world's pods are spread over (node-<i % 50>). */
export const STEADY_NODES = 50
/** Networks each pod of the steady world is attached to, of its 10. */
export const STEADY_PER_POD = 5

const RSS_NAMESPACE = "steady"

/** What a world of `pods` pods holds, and how to make any range of them. */
export interface WorldLayout {
  readonly pods: number
  /** Node objects node-0 … node-<nodes - 1>. */
  readonly nodes: number
  readonly namespaces: ReadonlyArray<string>
  /** Pods [from, to) with their namespace, node and attachments (deterministic by index). */
  readonly range: (from: number, to: number) => ReadonlyArray<BulkPod>
}

/** World facts of a layout: pools and allocations as its pods name them. */
export const worldFacts = (layout: WorldLayout) => {
  const pools = new Set<string>()
  let allocations = 0
  let attached = 0
  for (const p of layout.range(0, layout.pods)) {
    if (p.attachments.length > 0) attached++
    allocations += p.attachments.length
    for (const a of p.attachments) pools.add(a.net.pool)
  }
  return { pods: layout.pods, nodes: layout.nodes, namespaces: layout.namespaces.length, attachedPods: attached, pools: pools.size, allocations, reservations: allocations }
}

/** Pods per node in issue 47's cluster (150,000 pods on 5,000 nodes). */
export const PODS_PER_NODE = 30
/** Whereabouts' practical pool size: no pool of the scale world holds more allocations. */
export const POOL_ALLOCATIONS = 5_000
/** Where the scale world's NADs live; pods in other namespaces name them as `scale-nets/<nad>`. */
export const SCALE_NETS_NAMESPACE = "scale-nets"
/** Network k of the scale world: 10.(100+k).0.0/16, clear of the 10.0-9 ranges the scenarios use. */
const scaleNetworks = networks(SCALE_NETS_NAMESPACE, 40, (k) => `10.${100 + k}.0.0/16`)
/** Second attachments take networks from here on, so a pod's two addresses are on two networks. */
const SECOND_FAMILY = 20

/**
 * Issue 47's cluster of `pods` pods: pod i in namespace scale-<i mod 1,000> (a small world: one
 * per 10 pods), on node-<⌊i / 30⌋>; every third pod has a whereabouts attachment, every other of those a second
 * one, so allocations are half the pods; the n-th first attachment goes to network ⌊n / 5,000⌋,
 * the n-th second one to network 20 + ⌊n / 5,000⌋: no pool holds more than 5,000.
 */
export const scaleLayout = (pods: number): WorldLayout => {
  const nsCount = Math.max(1, Math.min(1_000, Math.ceil(pods / 10)))
  const net = (k: number) => {
    const n = scaleNetworks[k]
    if (n === undefined) throw new Error(`the scale layout has ${scaleNetworks.length} networks; ${pods} pods need more`)
    return n
  }
  const pod = (i: number): BulkPod => {
    const attachments: Array<{ net: Network; ifname: string }> = []
    if (i % 3 === 0) {
      const n = i / 3
      attachments.push({ net: net(Math.floor(n / POOL_ALLOCATIONS)), ifname: "net1" })
      if (n % 2 === 1) attachments.push({ net: net(SECOND_FAMILY + Math.floor((n - 1) / 2 / POOL_ALLOCATIONS)), ifname: "net2" })
    }
    return { name: `w-${i}`, namespace: `scale-${i % nsCount}`, nodeName: `node-${Math.floor(i / PODS_PER_NODE)}`, attachments }
  }
  return {
    pods,
    nodes: Math.ceil(pods / PODS_PER_NODE),
    namespaces: Array.from({ length: nsCount }, (_, k) => `scale-${k}`),
    range: (from, to) => Array.from({ length: Math.max(0, to - from) }, (_, k) => pod(from + k))
  }
}

/**
 * Grows the world `built` (the same layout at a smaller size; none: an empty cluster) into
 * `layout`: its namespaces, NADs, pods (10,000 per bulkStart, `progress` told after each) and
 * nodes; how long it took, the pods it added and their allocations.
 */
export const buildWorld = (plane: BenchPlane, layout: WorldLayout, built?: WorldLayout, progress?: (done: number, ms: number) => void) =>
  Effect.gen(function* () {
    const from = built?.pods ?? 0
    const t = performance.now()
    const api = yield* KubeApi
    yield* Effect.forEach(layout.namespaces, (name) => ignoreExists(api.create(R.Namespaces, undefined, { metadata: { name } })), { concurrency: 16, discard: true })
    let allocations = 0
    for (let a = from; a < layout.pods; a += 10_000) {
      const pods = layout.range(a, Math.min(layout.pods, a + 10_000))
      const nets = new Map(pods.flatMap((p) => p.attachments.map((x) => [`${x.net.namespace}/${x.net.nad}`, x.net] as const)))
      yield* createNetworks([...nets.values()])
      const started = yield* bulkStart(pods, { concurrency: 24, firstIndex: a })
      yield* patchStatuses(plane, started.map((p, k) => ({ namespace: p.namespace, name: p.name, index: a + k })))
      allocations += started.reduce((n, p) => n + p.ips.length, 0)
      progress?.(a + pods.length, performance.now() - t)
    }
    yield* createNodes(plane, built?.nodes ?? 0, layout.nodes)
    return { ms: performance.now() - t, pods: layout.pods - from, allocations }
  })

/** bench:apiserver's world, built at once: `pods` pods in one namespace over 50 nodes, each on 5 of 10 networks (round robin). */
export const buildSteadyWorld = (plane: BenchPlane, pods: number) => {
  const all = roundRobin(RSS_NAMESPACE, pods, networks(RSS_NAMESPACE, 10), STEADY_PER_POD, (i) => `node-${i % STEADY_NODES}`)
  const range = (from: number, to: number) => all.slice(from, to)
  return buildWorld(plane, { pods, nodes: STEADY_NODES, namespaces: [RSS_NAMESPACE], range })
}
