/**
 * Probe (leaves main after its reading, BENCHMARKS.md's Decisions): how long the event loop is held
 * while the invariant monitor judges caches of N running pods, a third of them with a whereabouts
 * address and its reservation (as bench:scale's world), on the in-memory cluster. A 1 ms timer
 * reads the longest gap between two of its ticks around each of four evaluations.
 *
 *   node --max-old-space-size=4096 bench/monitor-stall.ts [pods, default 150000]
 */
import { Duration, Effect, Option } from "effect"
import { makeInvariantMonitor } from "../src/programs/invariants.ts"
import { Caches } from "../src/services/Caches.ts"
import { KubeApi } from "../src/services/KubeApi.ts"
import * as R from "../src/services/resources.ts"
import { memory } from "../src/testing/layers.ts"
import { networkStatus, podObject, poolObject } from "../test/support/objects.ts"
import { createNad } from "../test/support/world.ts"

const N = Number(process.argv[2] ?? 150_000)
const NETS = 10
const POOLS = "kube-system"

const program = Effect.gen(function* () {
  const api = yield* KubeApi
  const allocations: Array<Record<string, { id: string; podref: string; ifname: string }>> = Array.from({ length: NETS }, () => ({}))
  for (let n = 0; n < NETS; n++) yield* createNad("default", `net${n}`, { range: `10.${n}.0.0/16` })
  for (let i = 0; i < N; i++) {
    const entries: Array<{ name: string; interface?: string; ips?: Array<string>; default?: boolean }> = [{ name: "cluster", interface: "eth0", ips: [`172.16.${(i >> 8) & 255}.${i & 255}`], default: true }]
    if (i % 3 === 0) {
      const n = (i / 3) % NETS
      const offset = Math.floor(i / 30) + 1
      entries.push({ name: `default/net${n}`, interface: "net1", ips: [`10.${n}.${offset >> 8}.${offset & 255}`] })
      allocations[n]![String(offset)] = { id: `c${i}`, podref: `default/pod-${i}`, ifname: "net1" }
      yield* api.create(R.OverlappingRangeIPReservations, POOLS, { metadata: { name: `10.${n}.${offset >> 8}.${offset & 255}`, namespace: POOLS }, spec: { podref: `default/pod-${i}` } })
    }
    const pod = podObject("default", `pod-${i}`, { nodeName: `node-${i % 5000}`, status: networkStatus(entries) })
    yield* api.create(R.Pods, "default", { ...pod, status: { phase: "Running" } })
  }
  for (let n = 0; n < NETS; n++) yield* api.create(R.IPPools, POOLS, poolObject(POOLS, `10.${n}.0.0-16`, `10.${n}.0.0/16`, allocations[n]!))
  const caches = yield* Caches
  yield* caches.awaitSynced
  while (caches.pods.byKey.size < N || caches.reservations.byKey.size < Math.ceil(N / 3) || Option.isNone(caches.pools.get(`10.${NETS - 1}.0.0-16`))) yield* Effect.sleep("100 millis")
  const monitor = yield* makeInvariantMonitor
  const readings: Array<string> = []
  for (let run = 0; run < 4; run++) {
    // A change in the pods' cache, so that the monitor judges the caches again.
    yield* api.create(R.Pods, "default", { ...podObject("default", `extra-${run}`, {}), status: { phase: "Pending" } })
    while (caches.pods.byKey.size < N + run + 1) yield* Effect.sleep("10 millis")
    yield* Effect.sleep("200 millis")
    let last = performance.now()
    let maxGap = 0
    const ticker = setInterval(() => {
      const now = performance.now()
      maxGap = Math.max(maxGap, now - last)
      last = now
    }, 1)
    yield* Effect.sleep("50 millis")
    const t0 = performance.now()
    yield* monitor.evaluate
    const ms = performance.now() - t0
    yield* Effect.sleep("50 millis")
    clearInterval(ticker)
    const h = { max: maxGap * 1e6 }
    readings.push(`evaluation ${ms.toFixed(0)} ms, longest event-loop block ${(h.max / 1e6).toFixed(0)} ms`)
  }
  console.log(JSON.stringify({ pods: N, readings }))
})

Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(memory({ namespace: POOLS, invariantGrace: Duration.minutes(1), invariantInterval: Duration.minutes(1) })))).catch((e: unknown) => {
  console.error(e)
  process.exit(1)
})
