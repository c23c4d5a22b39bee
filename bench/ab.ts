/**
 * Checkouts of the controller on one real API server, alternating, to tell a commit's cost from
 * the shared machine's noise. Each checkout's own program is the contender; the scenario and its
 * driver are this checkout's. Evidence for BENCHMARKS.md prose, not a benchmark command.
 *
 *   git worktree add /tmp/a <commit> && ln -s "$PWD/node_modules" /tmp/a/node_modules
 *   node bench/ab.ts <mass|single|rss> [--runs 3] [--pods n] [--per-pod n] [--qps n] [--fresh] /tmp/a /tmp/b …
 *
 *   mass    bench:apiserver's mass deletion (n pods, default 1,000, over 10 pools, `--per-pod`
 *           interfaces each, default 1): last delete → every pool entry free, → every entry and
 *           reservation free, → every Event written
 *   single  its single deletions (n pods, default 300, at 50/s): delete → pool entry and
 *           reservation free, p50 and p99
 *   rss     its steady world (n pods, default 10,000; `--pods 0`: networks and nodes alone), built
 *           once; each checkout's image bundle with the image's flags and environment: start →
 *           /readyz, VmRSS 10 s after its caches synced and the start-up sweep ran, and its CPU
 *           (millicores) over those 10 s
 *
 * `--fresh` starts an API server per run (for `rss`, the world built again): one server's watch
 * cache grows with every run, and alternating only spreads that drift evenly. The client limit
 * defaults to the shipped one; commits from before QPS 0 meant "none" need `--qps 500`.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { type BenchPlane, driverLayer, runOver, startBenchPlane } from "./lib/controlplane.ts"
import { apiserverEnv, SHIPPED, limitsAt, stolenSeconds } from "./lib/env.ts"
import { imageNodeFlags } from "./lib/image.ts"
import { memoryAfterSync } from "./lib/proc.ts"
import { parseProm, sum } from "./lib/prom.ts"
import { buildSteadyWorld } from "./lib/rssworld.ts"
import { count, massDeletion, singleDeletions } from "./lib/scenarios.ts"
import { fullyFreed } from "./lib/rows.ts"
import { spread } from "./lib/stats.ts"

const USAGE = "usage: node bench/ab.ts <mass|single|rss> [--runs n] [--pods n] [--per-pod n] [--qps n] [--fresh] <checkout> [<checkout> …]"
const { values, positionals } = parseArgs({
  options: { runs: { type: "string" }, pods: { type: "string" }, "per-pod": { type: "string" }, qps: { type: "string" }, fresh: { type: "boolean" }, help: { type: "boolean" } },
  allowPositionals: true
})
if (values.help === true) {
  process.stdout.write(`${USAGE}\n(bench/ab.ts's header says what each scenario measures)\n`)
  process.exit(0)
}
const [scenario, ...rest] = positionals
const PODS = { mass: 1_000, single: 300, rss: 10_000 } as const
if (scenario !== "mass" && scenario !== "single" && scenario !== "rss") throw new Error(USAGE)
const runs = Number(values.runs ?? 3)
const pods = Number(values.pods ?? PODS[scenario])
const perPod = Number(values["per-pod"] ?? 1)
// The burst follows the cap as the controller derives it (older checkouts are given it as API_BURST).
const limits = limitsAt(Number(values.qps ?? SHIPPED.qps))
const fresh = values.fresh === true
const checkouts = rest.map((a) => path.resolve(a))
if (checkouts.length === 0) throw new Error("no checkout given")

/** One number per run (ms or bytes) under a name, per checkout. */
const readings = new Map<string, Map<string, Array<number>>>(checkouts.map((c) => [c, new Map()]))
const note = (checkout: string, name: string, value: number) => {
  const byName = readings.get(checkout)!
  byName.set(name, [...(byName.get(name) ?? []), value])
}
/** A reading as its name's unit says: RSS in MiB, idle CPU in millicores, CPU in seconds, counts bare, the rest in ms. */
const fmt = (name: string, v: number) => {
  if (name.includes("RSS")) return `${(v / 2 ** 20).toFixed(1)} MiB`
  if (name.includes("idle CPU")) return `${v.toFixed(1)} millicores`
  if (name.includes("CPU")) return `${v.toFixed(1)} s`
  if (name.includes("patches") || name.includes("batches")) return String(Math.round(v))
  return `${Math.round(v)} ms`
}

/** What a run may leave behind on its server: watches still open, goroutines, its heap. */
const serverState = async (plane: BenchPlane) => {
  const m = parseProm(await plane.metrics(), (n) => n === "apiserver_longrunning_requests" || n === "go_goroutines" || n === "go_memstats_heap_inuse_bytes")
  const watches = sum(m, "apiserver_longrunning_requests", { verb: "WATCH" })
  return `${watches} watches open, ${sum(m, "go_goroutines")} goroutines, heap ${(sum(m, "go_memstats_heap_inuse_bytes") / 2 ** 20).toFixed(0)} MiB`
}

/** An API server ready for runs: for `rss`, with the steady world built. */
const startPlane = async (): Promise<BenchPlane> => {
  const plane = await startBenchPlane()
  try {
    if (scenario === "rss") await runOver(driverLayer(plane))(buildSteadyWorld(plane, pods))
    process.stdout.write(`${fresh ? "a fresh" : "the"} API server before the run: ${await serverState(plane)}\n`)
    return plane
  } catch (e) {
    await plane.stop()
    throw e
  }
}

const image = imageNodeFlags()
const bundles = new Map<string, string>()
if (scenario === "rss") {
  for (const c of checkouts) {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "ab-bundle-"))
    execFileSync(process.execPath, [path.join(c, "scripts/build.ts"), out], { cwd: c, stdio: ["ignore", "ignore", "inherit"] })
    bundles.set(c, path.join(out, "main.js"))
  }
}
const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "ab-logs-"))

/** One run of the scenario by checkout `c` on `plane`, its readings noted. */
const runOne = async (plane: BenchPlane, c: string, label: string) => {
  const effect = runOver(driverLayer(plane))
  const env = apiserverEnv(plane, { oursScript: path.join(c, "src/programs/main.ts") }).env
  if (scenario === "mass") {
    const r = await effect(massDeletion(env, "ours", { pods, pools: 10, perPod, limits, label }))
    note(c, "every pool entry free after the last delete", r.poolFreedMs)
    note(c, "every entry and reservation free", fullyFreed(r))
    note(c, "every Event written", r.eventsMs)
    // What the run cost: how long the deletes took, CPU seconds per process, the pool writes and the batches freed.
    note(c, "deletes", r.deleteWindowMs)
    note(c, "kube-apiserver CPU", r.cpu["kube-apiserver"] ?? Number.NaN)
    note(c, "controller CPU", r.cpu["contender"] ?? Number.NaN)
    note(c, "pool patches", count(r.calls, "patch", "ippools"))
    note(c, "batches", r.batches)
  } else if (scenario === "single") {
    const r = await effect(singleDeletions(env, "ours", { pods, rate: 50, limits, label }))
    note(c, "pool entry p50", r.pool.p50)
    note(c, "pool entry p99", r.pool.p99)
    note(c, "reservation p50", r.reservation.p50)
    note(c, "reservation p99", r.reservation.p99)
  } else {
    const r = await memoryAfterSync("ours", { kubeconfig: plane.kubeconfigPath, ...limits, logDir, label, script: bundles.get(c)!, nodeArgs: image.flags, env: image.env })
    note(c, "ready (caches synced) after its start", r.readyMs)
    note(c, "RSS 10 s after sync and sweep", r.rss)
    note(c, "peak RSS", r.hwm)
    note(c, "idle CPU over those 10 s", r.idleMillicores)
  }
}

let shared: BenchPlane | undefined
const planes = new Set<BenchPlane>()
const stopAll = () => Promise.all([...planes].map((p) => p.stop()))
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => void stopAll().finally(() => process.exit(130)))
try {
  for (let i = 0; i < runs; i++) {
    for (const c of checkouts) {
      const plane = fresh ? await startPlane() : (shared ??= await startPlane())
      planes.add(plane)
      const stolen0 = stolenSeconds()
      // Namespaces are named after it: an RFC 1123 label, whatever the checkout's directory is called.
      const label = `ab-${i}-${path.basename(c).toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/-+$/, "")}`
      await runOne(plane, c, label)
      const last = [...readings.get(c)!].map(([name, vs]) => `${name} ${fmt(name, vs.at(-1)!)}`).join(", ")
      process.stdout.write(`${c} #${i + 1}: ${last}\n`)
      process.stdout.write(`  the API server after it: ${await serverState(plane)}; CPU stolen by the hypervisor during the run ${(stolenSeconds() - stolen0).toFixed(1)} s\n`)
      if (fresh) {
        planes.delete(plane)
        await plane.stop()
      }
    }
  }
  for (const [c, byName] of readings) {
    for (const [name, vs] of byName) {
      const s = spread(vs)
      process.stdout.write(`${c}: ${name} median ${fmt(name, s.median)} (${fmt(name, s.min)}–${fmt(name, s.max)})\n`)
    }
  }
} finally {
  await stopAll()
}
process.exit(0)
