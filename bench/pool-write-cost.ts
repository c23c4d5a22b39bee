/**
 * What one IPPool write costs the API server, by the size of the pool: on a fresh control plane,
 * for each pool size, a pool of that many allocations (plus the ones to free) is created in one
 * write, as the plugin's writes leave it, then freed from by the controller's guarded JSON patch
 * (`releaseOps`, what IPPoolStore.release sends), one patch after another, PROBE_WRITES (100)
 * patches of PROBE_PER_WRITE (1 and 10, alternating pools) entries each. Per patch: kube-apiserver's
 * CPU (from /proc) and the wall time of the call. Evidence for BENCHMARKS.md prose; prints, writes
 * nothing.
 *
 *   node bench/pool-write-cost.ts [size ...]        default sizes: 100 1000 5000
 */
import { Effect } from "effect"
import { cpuSeconds, planePids, startBenchPlane } from "./lib/controlplane.ts"
import { driverLayer, runOver } from "./lib/live.ts"
import { fmt, ms } from "./lib/stats.ts"
import { table } from "./lib/results.ts"
import { POOL_NAMESPACE } from "./lib/world.ts"
import { parseIP } from "../src/domain/ip.ts"
import { KubeApi } from "../src/services/KubeApi.ts"
import { type ReleaseEntry, releaseOps } from "../src/services/IPPoolStore.ts"
import * as R from "../src/services/resources.ts"

const sizes = process.argv.length > 2 ? process.argv.slice(2).map(Number) : [100, 1_000, 5_000]
const writes = Number(process.env["PROBE_WRITES"] ?? 100)
const perWrite = (process.env["PROBE_PER_WRITE"] ?? "1,10").split(",").map(Number)
const log = (line: string) => process.stderr.write(`[pool-write-cost] ${line}\n`)

/** The allocation at `offset`, shaped as the plugin writes one (a 64-hex container id). */
const entry = (offset: number): ReleaseEntry & { readonly ifname: string } => ({
  key: String(offset),
  podref: `ns-probe/web-${offset}`,
  id: offset.toString(16).padStart(64, "0"),
  ip: parseIP("10.0.0.0")!,
  ifname: "net1"
})

const plane = await startBenchPlane()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
const apiserver = planePids(plane).apiserver
if (apiserver === undefined) throw new Error("no kube-apiserver pid")
log(`kube-apiserver ${plane.version}; ${writes} patches per pool size and entries per patch`)

const rows: Array<Array<string>> = []
try {
  await runOver(driverLayer(plane))(
    Effect.gen(function* () {
      const api = yield* KubeApi
      yield* Effect.ignore(api.create(R.Namespaces, undefined, { metadata: { name: POOL_NAMESPACE } }))
      for (const size of sizes) {
        for (const per of perWrite) {
          const name = `probe-${size}-${per}`
          const freed = writes * per
          const allocations = Object.fromEntries(Array.from({ length: size + freed }, (_, i) => entry(i + 1)).map((e) => [e.key, { id: e.id, podref: e.podref, ifname: e.ifname }]))
          yield* api.create(R.IPPools, POOL_NAMESPACE, { metadata: { name, namespace: POOL_NAMESPACE }, spec: { range: "10.0.0.0/16", allocations } })
          const cpu0 = cpuSeconds(apiserver)
          const t0 = performance.now()
          for (let w = 0; w < writes; w++) {
            const batch = Array.from({ length: per }, (_, j) => entry(size + w * per + j + 1))
            yield* api.patch(R.IPPools, POOL_NAMESPACE, name, { type: "json", ops: releaseOps(batch) }, { metadataOnly: true })
          }
          const wall = (performance.now() - t0) / writes
          const cpu = ((cpuSeconds(apiserver) - cpu0) * 1000) / writes
          yield* api.delete(R.IPPools, POOL_NAMESPACE, name)
          rows.push([`${size + freed} → ${size}`, String(per), `${fmt(cpu)} ms`, `${fmt(cpu / per)} ms`, ms(wall)])
          log(`pool of ${size + freed} → ${size} entries, ${per} per patch: kube-apiserver ${fmt(cpu)} CPU ms per patch, ${ms(wall)} per call`)
        }
      }
    })
  )
} finally {
  await plane.stop()
}
console.log(table(["pool entries (first → last patch)", "entries freed per patch", "kube-apiserver CPU per patch", "per entry freed", "wall per patch (one at a time)"], rows))
