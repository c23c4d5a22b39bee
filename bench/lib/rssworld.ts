/**
 * The big steady-state world for the memory and sync measurements: 10k realistic pods, each on 5
 * of 10 networks (10 pools × 5k allocations, 50k reservations), with the status a kubelet would
 * have written (pods/status, which a create cannot set), on the 50 Node objects they name (Ready,
 * as a kubelet reports it), so the node informer holds what it would in a cluster.
 */
import { Effect } from "effect"
import { Agent, fetch } from "undici"
import type { BenchPlane } from "./controlplane.ts"
import { realisticStatus } from "./pods.ts"
import { bulkStart, createNetworks, networks, roundRobin } from "./world.ts"

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

/** PATCHes every pod's status subresource (merge patch), `concurrency` at a time. */
const patchStatuses = async (plane: BenchPlane, namespace: string, names: ReadonlyArray<string>, concurrency = 16) => {
  const client = adminClient(plane)
  try {
    let next = 0
    const worker = async () => {
      for (let i = next++; i < names.length; i = next++) {
        await client.call("PATCH", `/api/v1/namespaces/${namespace}/pods/${names[i]}/status`, { status: realisticStatus(i) }, "application/merge-patch+json")
      }
    }
    await Promise.all(Array.from({ length: concurrency }, worker))
  } finally {
    await client.close()
  }
}

/** The Nodes the pods name (node-0 … node-{n-1}, realisticPod's spread), each Ready through nodes/status. */
const createNodes = async (plane: BenchPlane, n: number) => {
  const { call, close } = adminClient(plane)
  try {
    for (let i = 0; i < n; i++) {
      const name = `node-${i}`
      const labels = { "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "bare-metal" }
      await call("POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name, labels }, spec: { podCIDR: `10.244.${i}.0/24` } })
      const now = new Date().toISOString()
      const conditions = ["MemoryPressure", "DiskPressure", "PIDPressure"].map((type) => ({ type, status: "False", lastHeartbeatTime: now, lastTransitionTime: now, reason: `KubeletHasNo${type}` }))
      conditions.push({ type: "Ready", status: "True", lastHeartbeatTime: now, lastTransitionTime: now, reason: "KubeletReady" })
      const capacity = { cpu: "64", memory: "263856280Ki", pods: "250", "ephemeral-storage": "1921724676Ki" }
      await call("PATCH", `/api/v1/nodes/${name}/status`, { status: { conditions, capacity, allocatable: capacity, addresses: [{ type: "InternalIP", address: `192.168.10.${i + 10}` }, { type: "Hostname", address: name }] } }, "application/merge-patch+json")
    }
  } finally {
    await close()
  }
}

/** How many Node objects the steady world's pods are spread over (realisticPod: node-<i % 50>). */
export const STEADY_NODES = 50

export const RSS_NAMESPACE = "steady"

/** Builds the world; returns how long it took and its size. */
export const buildSteadyWorld = (plane: BenchPlane, pods: number, pools: number, perPod: number) =>
  Effect.gen(function* () {
    const t = performance.now()
    const nets = networks(RSS_NAMESPACE, pools)
    yield* createNetworks(nets)
    const started = yield* bulkStart(RSS_NAMESPACE, roundRobin("web", pods, nets, perPod), { concurrency: 24 })
    yield* Effect.promise(() => patchStatuses(plane, RSS_NAMESPACE, started.map((p) => p.name)))
    yield* Effect.promise(() => createNodes(plane, STEADY_NODES))
    return { ms: performance.now() - t, pods: started.length, allocations: started.reduce((a, p) => a + p.ips.length, 0) }
  })
