/**
 * The floor under the single-deletion miss in BENCHMARKS.md: what this machine's API server
 * answers for the deletion path's requests with no controller at all (`singleFloor` in
 * bench/lib/scenarios.ts: the benchmark sends, as each pod DELETE is answered, the re-check GET,
 * the reservation DELETE, the guarded pool patch and the Event itself), and, alternating with it
 * on the same API server, the controller in the same scenario (`singleDeletions`, shipped
 * defaults). Optionally first grows the API server with mass deletions, as the full benchmark
 * has grown it by the time it runs its single deletions. Prints per run: delete issued → pool
 * entry gone p50/p99, the slowest pods and when they were issued, CPU seconds per process, and
 * the API server's Go heap and GC over the stream. Evidence for BENCHMARKS.md prose; prints,
 * writes nothing.
 *
 *   node bench/single-floor.ts                   the floor once: 1,000 pods at 50/s
 *   FLOOR_COMPARE=3 node bench/single-floor.ts   floor, controller, floor, ... three times each
 *   FLOOR_AFTER_MASS=5000 FLOOR_MASS_RUNS=2 node bench/single-floor.ts
 *                                                first that many mass deletions of that many pods
 *                                                (the controller, shipped defaults, two interfaces
 *                                                per pod) on the same API server
 *   FLOOR_PODS=500 FLOOR_RATE=25 FLOOR_EVENTS=0 FLOOR_RECHECK=0 ...   scale, rate, without the
 *                                                Event or the re-check GET
 *   FLOOR_HEAP_PROFILE=/tmp/apiserver.heap ...   at the end, kube-apiserver's heap profile (after a
 *                                                GC) to that file, and what of its heap in use was
 *                                                allocated decoding etcd's watch events: the objects
 *                                                its watch cache keeps (needs Go for the summary)
 */
import { execFileSync } from "node:child_process"
import { pprofTo, startBenchPlane } from "./lib/controlplane.ts"
import { SHIPPED, apiserverEnv } from "./lib/env.ts"
import { driverLayer, runOver } from "./lib/live.ts"
import { parseProm } from "./lib/prom.ts"
import { massDeletion, singleDeletions, singleFloor } from "./lib/scenarios.ts"
import { fmt, ms } from "./lib/stats.ts"

const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const pods = num("FLOOR_PODS", 1_000)
const rate = num("FLOOR_RATE", 50)
const compare = num("FLOOR_COMPARE", 0)
const afterMass = num("FLOOR_AFTER_MASS", 0)
const massRuns = num("FLOOR_MASS_RUNS", 1)
const heapProfile = process.env["FLOOR_HEAP_PROFILE"]
const log = (line: string) => process.stderr.write(`[single-floor] ${line}\n`)

const plane = await startBenchPlane()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
const { env, logDir } = apiserverEnv(plane)
const run = runOver(driverLayer(plane))

/** The API server's Go heap in use and GC counters. */
const goStats = async () => {
  const want = new Set(["go_memstats_heap_inuse_bytes", "go_gc_duration_seconds_count"])
  const got = parseProm(await plane.metrics(), (n) => want.has(n))
  const v = (n: string) => got.find((x) => x.name === n)?.value ?? Number.NaN
  return { heapMiB: v("go_memstats_heap_inuse_bytes") / 2 ** 20, gcs: v("go_gc_duration_seconds_count") }
}
/** CPU seconds per process, leaving out what was not measured (the floor has no contender). */
const cpuText = (cpu: Record<string, number>) =>
  Object.entries(cpu)
    .filter(([, v]) => !Number.isNaN(v))
    .map(([k, v]) => `${k} ${fmt(v)}`)
    .join(", ")

/**
 * kube-apiserver's heap in use, and the part allocated while decoding etcd watch events (the
 * objects of every version its watch cache holds), from `go tool pprof -top -cum` of a heap profile.
 */
const heapSummary = (file: string) => {
  const top = execFileSync("go", ["tool", "pprof", "-top", "-cum", "-inuse_space", "-nodecount=200", file], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  const total = /of ([\d.]+[kMG]?B) total/.exec(top)?.[1] ?? "?"
  const decode = top.split("\n").find((l) => l.trim().endsWith("etcd3.decodeObj"))?.trim().split(/\s+/).slice(3, 5).join(" ") ?? "? (no etcd3.decodeObj line)"
  return `in use ${total}; allocated decoding etcd watch events (etcd3.decodeObj), cum: ${decode}`
}

try {
  log(`kube-apiserver ${plane.version}; ${pods} pods at ${rate}/s; contender logs in ${logDir}`)
  for (let i = 0; i < (afterMass > 0 ? massRuns : 0); i++) {
    const m = await run(massDeletion(env, "ours", { pods: afterMass, pools: 10, perPod: 2, limits: SHIPPED, label: `pre-${i}` }))
    log(`mass deletion ${i + 1}/${massRuns} of ${afterMass} pods × 2: every pool entry free ${ms(m.poolFreedMs)} after the last delete`)
  }
  for (let i = 0; i < Math.max(1, compare); i++) {
    const go0 = await goStats()
    const floor = await run(
      singleFloor(env, { pods, pools: 10, rate, label: `floor-${i}`, recheck: process.env["FLOOR_RECHECK"] !== "0", events: process.env["FLOOR_EVENTS"] !== "0" })
    )
    const go1 = await goStats()
    console.log(
      `floor #${i + 1}: ${floor.completed}/${floor.pods} freed; pool entry free p50 ${ms(floor.pool.p50)} / p99 ${ms(floor.pool.p99)} / max ${ms(floor.pool.max)}; reservation p99 ${ms(floor.reservation.p99)}; ` +
        `${floor.failures.length} failed requests${floor.failures.length > 0 ? ` (first: ${floor.failures[0]})` : ""}`
    )
    console.log(`  slowest (issued at +s: ms): ${floor.slowest.map((x) => `${fmt(x.atMs / 1000)}: ${ms(x.ms)}`).join(", ")}`)
    console.log(`  CPU s: ${cpuText(floor.cpu)}; kube-apiserver heap ${fmt(go0.heapMiB)} → ${fmt(go1.heapMiB)} MiB, ${go1.gcs - go0.gcs} GCs`)
    if (compare === 0) continue
    const g0 = await goStats()
    const ours = await run(singleDeletions(env, "ours", { pods, pools: 10, rate, limits: SHIPPED, label: `ours-${i}` }))
    const g1 = await goStats()
    console.log(`controller #${i + 1}: pool entry free p50 ${ms(ours.pool.p50)} / p99 ${ms(ours.pool.p99)} / max ${ms(ours.pool.max)}; reservation p99 ${ms(ours.reservation.p99)}`)
    console.log(`  CPU s: ${cpuText(ours.cpu)}; kube-apiserver heap ${fmt(g0.heapMiB)} → ${fmt(g1.heapMiB)} MiB, ${g1.gcs - g0.gcs} GCs`)
  }
  if (heapProfile !== undefined) {
    await pprofTo(plane, "heap?gc=1", heapProfile)
    console.log(`kube-apiserver heap profile: ${heapProfile}`)
    try {
      console.log(`  ${heapSummary(heapProfile)}`)
    } catch (e) {
      console.log(`  go tool pprof unavailable (${(e as Error).message.split("\n")[0]})`)
    }
  }
} finally {
  await plane.stop()
}
