/**
 * Where an informer sync of the steady world's pods spends its time: builds the world of
 * `npm run bench:apiserver`'s RSS row (PROBE_PODS, 10,000), then syncs the pod informer (ours,
 * KubeApiLive, no client cap) at page sizes given as arguments (default 500), alternating,
 * PROBE_RUNS (3) times each; per sync: wall time, this process's CPU and kube-apiserver's CPU.
 *
 *   node bench/list-probe.ts [pageSize ...]
 *   PROBE_PROFILE=1: one more sync at the first page size under a V8 CPU profile of this
 *   process, summarized by function and package (where the client's time goes).
 *   PROBE_CHECKOUTS=<dir>,<dir>…: each checkout's own informer and client (its src and bench/lib,
 *   loaded from it; a worktree with node_modules) instead of this one's, alternating, on one world.
 */
import * as fs from "node:fs"
import { Session } from "node:inspector/promises"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Layer } from "effect"
import { summarize } from "./lib/cpuprofile.ts"
import { cpuSeconds, planePids, startBenchPlane } from "./lib/controlplane.ts"
import { driverLayer } from "./lib/live.ts"
import { buildSteadyWorld } from "./lib/rssworld.ts"
import type * as ControllerConfig from "../src/services/ControllerConfig.ts"
import type * as KubeApiLive from "../src/services/KubeApiLive.ts"
import type * as Scenarios from "./lib/scenarios.ts"

const sizes = process.argv.slice(2).map(Number)
if (sizes.length === 0) sizes.push(500)
const pods = Number(process.env["PROBE_PODS"] ?? 10_000)
const runs = Number(process.env["PROBE_RUNS"] ?? 3)
const log = (line: string) => process.stderr.write(`[list-probe] ${line}\n`)

/** The modules a sync needs, from one checkout. */
interface Code {
  readonly label: string
  readonly layerWith: typeof ControllerConfig.layerWith
  readonly layerLive: typeof KubeApiLive.layerLive
  readonly informerSync: typeof Scenarios.informerSync
}
const codeFrom = async (dir: string, label: string): Promise<Code> => {
  const load = (file: string) => import(path.resolve(dir, file))
  const [config, live, scenarios] = await Promise.all([load("src/services/ControllerConfig.ts"), load("src/services/KubeApiLive.ts"), load("bench/lib/scenarios.ts")])
  return { label, layerWith: config.layerWith, layerLive: live.layerLive, informerSync: scenarios.informerSync }
}
const checkouts = (process.env["PROBE_CHECKOUTS"] ?? "").split(",").filter((d) => d !== "")
const codes: ReadonlyArray<Code> =
  checkouts.length === 0 ? [await codeFrom(path.resolve(import.meta.dirname, ".."), "")] : await Promise.all(checkouts.map((dir) => codeFrom(dir, dir)))
const plane = await startBenchPlane()
try {
  const world = await Effect.runPromise(buildSteadyWorld(plane, pods, 10, 5).pipe(Effect.provide(driverLayer(plane))))
  log(`world built in ${Math.round(world.ms / 1000)} s`)
  const layerFor = (code: Code) => code.layerLive.pipe(Layer.provide(code.layerWith({ kubeconfig: plane.kubeconfigPath, apiQps: 0 })), Layer.orDie)
  const apiserver = planePids(plane).apiserver!
  const results = new Map<string, Array<string>>()
  const sync = (pageSize: number, code: Code = codes[0]!) =>
    Effect.runPromise(Effect.map(code.informerSync("ours", pageSize), (r) => r.pods).pipe(Effect.provide(layerFor(code))))
  for (let i = 0; i < runs; i++) {
    for (const code of codes) for (const pageSize of sizes) {
      const cpu0 = process.cpuUsage()
      const s0 = cpuSeconds(apiserver)
      const t = performance.now()
      const n = await sync(pageSize, code)
      const ms = performance.now() - t
      const cpu = process.cpuUsage(cpu0)
      const line = `${Math.round(ms)} ms (client CPU ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s, apiserver CPU ${(cpuSeconds(apiserver) - s0).toFixed(2)} s, ${n} pods)`
      const key = `${code.label === "" ? "" : `${code.label}: `}page ${pageSize}`
      results.set(key, [...(results.get(key) ?? []), line])
      log(`${key}: ${line}`)
    }
  }
  if (process.env["PROBE_PROFILE"] === "1") {
    const session = new Session()
    session.connect()
    await session.post("Profiler.enable")
    await session.post("Profiler.start")
    await sync(sizes[0]!)
    const { profile } = await session.post("Profiler.stop")
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "list-probe-")), "sync.cpuprofile")
    fs.writeFileSync(file, JSON.stringify(profile))
    const s = summarize(file, 25)
    process.stdout.write(`profile ${file}: ${Math.round(s.totalMs)} ms, idle ${Math.round(s.idleMs)} ms\n`)
    for (const f of s.byFunction) process.stdout.write(`  ${f.fn}: ${Math.round(f.ms)} ms (${f.pct.toFixed(1)} %)\n`)
    for (const p of s.byPackage) process.stdout.write(`  [${p.pkg}]: ${Math.round(p.ms)} ms (${p.pct.toFixed(1)} %)\n`)
  }
  for (const [key, lines] of results) {
    const median = [...lines.map((l) => Number(l.split(" ")[0]))].sort((a, b) => a - b)[Math.floor(lines.length / 2)]
    process.stdout.write(`${key}: median ${median} ms\n${lines.map((l) => `  ${l}`).join("\n")}\n`)
  }
} finally {
  await plane.stop()
}
