/**
 * The big steady-state world for the memory and sync measurements: 10k realistic pods, each on 5
 * of 10 networks (10 pools × 5k allocations, 50k reservations), with the status a kubelet would
 * have written (pods/status, which a create cannot set).
 */
import { Effect } from "effect"
import { Agent, fetch } from "undici"
import type { BenchPlane } from "./controlplane.ts"
import { realisticStatus } from "./pods.ts"
import { bulkStart, createNetworks, networks, roundRobin } from "./world.ts"

/** PATCHes every pod's status subresource (merge patch), `concurrency` at a time. */
const patchStatuses = async (plane: BenchPlane, namespace: string, names: ReadonlyArray<string>, concurrency = 16) => {
  const dispatcher = new Agent({ connect: { ca: plane.caPem }, keepAliveTimeout: 30_000 })
  try {
    let next = 0
    const worker = async () => {
      for (let i = next++; i < names.length; i = next++) {
        const res = await fetch(`${plane.server}/api/v1/namespaces/${namespace}/pods/${names[i]}/status`, {
          method: "PATCH",
          dispatcher,
          headers: { Authorization: `Bearer ${plane.token}`, "Content-Type": "application/merge-patch+json", Accept: "application/json" },
          body: JSON.stringify({ status: realisticStatus(i) })
        })
        await res.text()
        if (res.status !== 200) throw new Error(`status of ${names[i]}: HTTP ${res.status}`)
      }
    }
    await Promise.all(Array.from({ length: concurrency }, worker))
  } finally {
    await dispatcher.close()
  }
}

export const RSS_NAMESPACE = "steady"

/** Builds the world; returns how long it took and its size. */
export const buildSteadyWorld = (plane: BenchPlane, pods: number, pools: number, perPod: number) =>
  Effect.gen(function* () {
    const t = performance.now()
    const nets = networks(RSS_NAMESPACE, pools)
    yield* createNetworks(nets)
    const started = yield* bulkStart(RSS_NAMESPACE, roundRobin("web", pods, nets, perPod), { concurrency: 24 })
    yield* Effect.promise(() => patchStatuses(plane, RSS_NAMESPACE, started.map((p) => p.name)))
    return { ms: performance.now() - t, pods: started.length, allocations: started.reduce((a, p) => a + p.ips.length, 0) }
  })
