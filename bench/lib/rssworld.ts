/**
 * The standing worlds of the memory, sync and scale measurements: realistic pods with a kubelet's
 * status (written through pods/status) on the Ready Node objects they name: bench:apiserver's
 * steady world (`buildSteadyWorld`) and issue 47's cluster (`scaleLayout`), which `buildWorld` grows.
 */
import { Effect } from "effect"
import { Agent, fetch } from "undici"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import type { BenchPlane } from "./controlplane.ts"
import { realisticStatus } from "./pods.ts"
import { type BulkPod, type Network, bulkStart, createNetworks, ignoreExists, networks, roundRobin } from "./world.ts"

/** Requests as the admin over one keep-alive connection pool; `close` when done. A non-2xx answer (409 aside) throws. */
const adminClient = (plane: BenchPlane) => {
  const dispatcher = new Agent({ connect: { ca: plane.caPem }, keepAliveTimeout: 30_000 })
  const call = async (method: string, p: string, body: unknown, contentType = "application/json") => {
    const res = await fetch(`${plane.server}${p}`, {
      method,
      dispatcher,
      headers: { Authorization: `Bearer ${plane.token}`, "Content-Type": contentType, Accept: "application/json" },
      body: JSON.stringify(body)
    })
    await res.text()
    if (res.status !== 200 && res.status !== 201 && res.status !== 409) throw new Error(`${method} ${p}: HTTP ${res.status}`)
  }
  return { call, close: () => dispatcher.close() }
}

/** Runs `f` over 0..n-1, 16 at a time. */
const pool = async (n: number, f: (i: number) => Promise<void>) => {
  let next = 0
  const worker = async () => {
    for (let i = next++; i < n; i = next++) await f(i)
  }
  await Promise.all(Array.from({ length: 16 }, worker))
}

/** PATCHes every pod's status subresource (merge patch; `index` picks its realisticStatus). */
const patchStatuses = async (plane: BenchPlane, pods: ReadonlyArray<{ readonly namespace: string; readonly name: string; readonly index: number }>) => {
  const client = adminClient(plane)
  try {
    await pool(pods.length, async (i) => {
      const p = pods[i]!
      await client.call("PATCH", `/api/v1/namespaces/${p.namespace}/pods/${p.name}/status`, { status: realisticStatus(p.index) }, "application/merge-patch+json")
    })
  } finally {
    await client.close()
  }
}

/** Nodes node-<from> … node-<to - 1> (the names the layouts give pods), each Ready through nodes/status. */
export const createNodes = async (plane: BenchPlane, from: number, to: number) => {
  const { call, close } = adminClient(plane)
  try {
    await pool(to - from, async (k) => {
      const i = from + k
      const name = `node-${i}`
      // Addresses valid for any i below 32,768.
      const podCIDR = `10.${128 + (i >> 8)}.${i & 255}.0/24`
      const ip = `192.168.${i >> 8}.${i & 255}`
      const labels = { "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "bare-metal" }
      await call("POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name, labels }, spec: { podCIDR } })
      const now = new Date().toISOString()
      const conditions = ["MemoryPressure", "DiskPressure", "PIDPressure"].map((type) => ({ type, status: "False", lastHeartbeatTime: now, lastTransitionTime: now, reason: `KubeletHasNo${type}` }))
      conditions.push({ type: "Ready", status: "True", lastHeartbeatTime: now, lastTransitionTime: now, reason: "KubeletReady" })
      const capacity = { cpu: "64", memory: "263856280Ki", pods: "250", "ephemeral-storage": "1921724676Ki" }
      await call("PATCH", `/api/v1/nodes/${name}/status`, { status: { conditions, capacity, allocatable: capacity, addresses: [{ type: "InternalIP", address: ip }, { type: "Hostname", address: name }] } }, "application/merge-patch+json")
    })
  } finally {
    await close()
  }
}

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
      const started = yield* bulkStart(layout.namespaces[0]!, pods, { concurrency: 24, firstIndex: a })
      yield* Effect.promise(() => patchStatuses(plane, started.map((p, k) => ({ namespace: p.namespace, name: p.name, index: a + k }))))
      allocations += started.reduce((n, p) => n + p.ips.length, 0)
      progress?.(a + pods.length, performance.now() - t)
    }
    yield* Effect.promise(() => createNodes(plane, built?.nodes ?? 0, layout.nodes))
    return { ms: performance.now() - t, pods: layout.pods - from, allocations }
  })

/** bench:apiserver's world, built at once: `pods` pods in one namespace over 50 nodes, each on 5 of 10 networks (round robin). */
export const buildSteadyWorld = (plane: BenchPlane, pods: number) => {
  const all = roundRobin("web", pods, networks(RSS_NAMESPACE, 10), STEADY_PER_POD)
  const range = (from: number, to: number) => all.slice(from, to).map((p, k) => ({ ...p, namespace: RSS_NAMESPACE, nodeName: `node-${(from + k) % STEADY_NODES}` }))
  return buildWorld(plane, { pods, nodes: STEADY_NODES, namespaces: [RSS_NAMESPACE], range })
}
