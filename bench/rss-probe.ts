/**
 * Where the controller's resident memory goes, for the RSS row of BENCHMARKS.md: starts the real
 * API server, builds the steady world of `npm run bench:apiserver` (10k pods on 5 of 10
 * networks; `PROBE_PODS` to change), then starts the compiled controller once per variant and
 * reports, after its caches synced and the start-up sweep ran: VmRSS, the runtime's own view
 * (prom-client's nodejs_heap_* and process_* metrics) and a heap-snapshot summary (largest
 * constructors).
 *
 *   node bench/rss-probe.ts [variant ...]     variants: default, semi16, semi4 (node flags)
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { Effect } from "effect"
import { startBenchPlane } from "./lib/controlplane.ts"
import { apiserverEnv } from "./lib/env.ts"
import { summarizeHeap } from "./lib/heapsnapshot.ts"
import { driverLayer } from "./lib/live.ts"
import { ROOT } from "./lib/paths.ts"
import { spawnContender, waitMetric } from "./lib/proc.ts"
import { sum } from "./lib/prom.ts"
import { buildSteadyWorld } from "./lib/rssworld.ts"

const VARIANTS: Record<string, ReadonlyArray<string>> = {
  default: [],
  semi16: ["--max-semi-space-size=16"],
  semi4: ["--max-semi-space-size=4"],
  optsize: ["--max-semi-space-size=4", "--optimize-for-size"]
}
const chosen = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ["default", "semi16"]
for (const v of chosen) if (!(v in VARIANTS)) throw new Error(`unknown variant ${v}; known: ${Object.keys(VARIANTS).join(", ")}`)
const pods = Number(process.env["PROBE_PODS"] ?? 10_000)
const log = (line: string) => process.stderr.write(`[rss-probe] ${line}\n`)
const MiB = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`

execFileSync(path.join(ROOT, "node_modules/.bin/tsc"), ["-p", path.join(ROOT, "tsconfig.build.json"), "--outDir", path.join(ROOT, "bench/.build")], { cwd: ROOT, stdio: "inherit" })
const plane = await startBenchPlane()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
try {
  const { logDir } = apiserverEnv(plane)
  log(`building the world: ${pods} pods, 10 pools`)
  const world = await Effect.runPromise(buildSteadyWorld(plane, pods, 10, 5).pipe(Effect.provide(driverLayer(plane))))
  log(`built in ${(world.ms / 1000).toFixed(0)} s: ${world.allocations} allocations`)
  for (const variant of chosen) {
    const snapDir = fs.mkdtempSync(path.join(logDir, `snap-${variant}-`))
    const p = await spawnContender("ours", {
      kubeconfig: plane.kubeconfigPath,
      qps: 20,
      burst: 30,
      logDir,
      label: `probe-${variant}`,
      env: { LOG_LEVEL: "info" },
      nodeArgs: ["--max-old-space-size=205", ...VARIANTS[variant]!, "--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${snapDir}`],
      script: path.join(ROOT, "bench/.build/programs/main.js")
    })
    try {
      await p.ready(300_000)
      await waitMetric(p, (s) => sum(s, "whereabouts_controller_sweeps_total") >= 1, "start-up sweep", 300_000, 200)
      await sleep(10_000)
      const rss = p.memory()
      const text = await p.metricsText()
      const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)`, "m").exec(text)?.[1] ?? Number.NaN)
      log(`${variant}: VmRSS ${MiB(rss.rss)} (peak ${MiB(rss.hwm)})`)
      for (const m of ["nodejs_heap_size_total_bytes", "nodejs_heap_size_used_bytes", "nodejs_external_memory_bytes"]) log(`  ${m} ${MiB(metric(m))}`)
      for (const space of ["new", "old", "code", "large_object", "read_only", "trusted", "trusted_large_object"]) {
        const total = Number(new RegExp(`^nodejs_heap_space_size_total_bytes\\{space="${space}"\\} (\\S+)`, "m").exec(text)?.[1] ?? Number.NaN)
        const used = Number(new RegExp(`^nodejs_heap_space_size_used_bytes\\{space="${space}"\\} (\\S+)`, "m").exec(text)?.[1] ?? Number.NaN)
        if (Number.isFinite(total)) log(`  space ${space}: ${MiB(used)} used of ${MiB(total)}`)
      }
      process.kill(p.pid, "SIGUSR2")
      // V8 writes the snapshot in chunks: wait until the file stops growing and parses.
      let summary: ReturnType<typeof summarizeHeap> | undefined
      let lastSize = -1
      for (let i = 0; i < 300 && summary === undefined; i++) {
        await sleep(2_000)
        const done = fs.readdirSync(snapDir).find((f) => f.endsWith(".heapsnapshot"))
        if (done === undefined) continue
        const size = fs.statSync(path.join(snapDir, done)).size
        if (size === lastSize && size > 0) {
          try {
            summary = summarizeHeap(path.join(snapDir, done), 20)
            fs.rmSync(path.join(snapDir, done))
          } catch {
            // not complete yet
          }
        }
        lastSize = size
      }
      if (summary === undefined) throw new Error("no complete heap snapshot written")
      log(`  heap snapshot ${MiB(summary.total)} live`)
      for (const t of summary.byType.slice(0, 8)) log(`    type ${t.type}: ${MiB(t.bytes)} (${t.count})`)
      for (const n of summary.byName.slice(0, 20)) log(`    ${n.name}: ${MiB(n.bytes)} (${n.count})`)
    } finally {
      await p.stop()
    }
  }
} finally {
  await plane.stop()
}
process.exit(0)
