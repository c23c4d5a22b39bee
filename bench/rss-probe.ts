/**
 * Where the controller's resident memory goes, for the RSS row of BENCHMARKS.md: starts the real
 * API server, builds the steady world of `npm run bench:apiserver` (10k pods on 5 of 10
 * networks; `PROBE_PODS` to change), then starts the compiled controller once per variant and
 * reports, after its caches synced and the start-up sweep ran: VmRSS, the runtime's own view
 * (prom-client's nodejs_heap_* and process_* metrics) and a heap-snapshot summary (largest
 * constructors).
 *
 *   node bench/rss-probe.ts [variant ...]     variants: image (default), image-tsc, no-malloc-env,
 *                                             v8-young, semi4, semi8, single-threaded-gc,
 *                                             optimize-for-size, heap-growing-25, mmap64k, mmap32k
 *   PROBE_BURST=n (one variant): then deletes n pods and reads the RSS once they are freed.
 *   PROBE_CHURN=r (one variant): then deletes r pods a second, one at a time, for
 *   PROBE_CHURN_SECONDS (300), reading the RSS every 30 s: steady churn, which never leaves the
 *   deletion loop idle long enough for its reclaim after a mass deletion.
 *   PROBE_CHURN_SNAPSHOT=1 also takes one a minute into the churn. PROBE_WORKERS=n sets --workers.
 *   PROBE_SNAPSHOT=0 skips the heap snapshot at the end; the RSS is also read 20 and 50 s later, with where
 *   it lives (/proc/<pid>/smaps: V8's pages, glibc's arenas, the node binary, and which of the
 *   binary's sections are resident, ICU's data on its own).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { Effect, ManagedRuntime } from "effect"
import { startBenchPlane } from "./lib/controlplane.ts"
import { apiserverEnv } from "./lib/env.ts"
import { imageNodeFlags } from "./lib/image.ts"
import { summarizeHeap } from "./lib/heapsnapshot.ts"
import { driverLayer } from "./lib/live.ts"
import { ROOT } from "./lib/paths.ts"
import { spawnContender, waitMetric } from "./lib/proc.ts"
import { delta, parseProm, sum } from "./lib/prom.ts"
import { bundle } from "../scripts/build.ts"
import { RSS_NAMESPACE, buildSteadyWorld } from "./lib/rssworld.ts"
import { deleteAll } from "./lib/world.ts"
import { binaryResidency, smapsSummary } from "./lib/smaps.ts"

/** The image's node flags (the heap cap left out: the probe sets its own) and glibc allocator settings. */
const image = imageNodeFlags()
const IMAGE_FLAGS = image.flags.filter((f) => !f.startsWith("--max-old-space-size"))
const IMAGE_ENV = Object.fromEntries(Object.entries(image.env).filter(([k]) => k.startsWith("MALLOC_")))
interface Variant {
  readonly flags: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>>
  /** The image's bundle (scripts/build.ts) or tsc's one file per module with node_modules. */
  readonly program: "bundle" | "tsc"
}
const VARIANTS: Record<string, Variant> = {
  image: { flags: IMAGE_FLAGS, env: IMAGE_ENV, program: "bundle" },
  "image-tsc": { flags: IMAGE_FLAGS, env: IMAGE_ENV, program: "tsc" },
  "no-malloc-env": { flags: IMAGE_FLAGS, program: "bundle" },
  "v8-young": { flags: IMAGE_FLAGS.filter((f) => !f.startsWith("--max-semi-space-size")), env: IMAGE_ENV, program: "bundle" },
  semi4: { flags: ["--max-semi-space-size=4"], env: IMAGE_ENV, program: "bundle" },
  semi8: { flags: [...IMAGE_FLAGS.filter((f) => !f.startsWith("--max-semi-space-size")), "--max-semi-space-size=8"], env: IMAGE_ENV, program: "bundle" },
  // V8's garbage collector on the main thread only: no helper threads (their stacks and arenas).
  "single-threaded-gc": { flags: [...IMAGE_FLAGS, "--single-threaded-gc"], env: IMAGE_ENV, program: "bundle" },
  // Smaller still, but GC took a third of the controller's CPU and single deletions slowed ~6x
  // (bench/single-profile.ts with PROFILE_NODE_ARGS=--optimize-for-size).
  "optimize-for-size": { flags: [...IMAGE_FLAGS, "--optimize-for-size"], env: IMAGE_ENV, program: "bundle" },
  // The old generation may grow by a fixed 25 % over the live heap before the next full GC,
  // instead of V8's own factor (up to 2x at this heap cap): for the churn RSS.
  "heap-growing-25": { flags: [...IMAGE_FLAGS, "--heap-growing-percent=25"], env: IMAGE_ENV, program: "bundle" },
  // glibc serves allocations from this size up with their own mappings, returned when freed,
  // instead of from the arena, whose free pages stay resident between live chunks.
  mmap64k: { flags: IMAGE_FLAGS, env: { ...IMAGE_ENV, MALLOC_MMAP_THRESHOLD_: "65536", MALLOC_TRIM_THRESHOLD_: "65536" }, program: "bundle" },
  mmap32k: { flags: IMAGE_FLAGS, env: { ...IMAGE_ENV, MALLOC_MMAP_THRESHOLD_: "32768", MALLOC_TRIM_THRESHOLD_: "32768" }, program: "bundle" }
}
const snapshot = process.env["PROBE_SNAPSHOT"] !== "0"
/** PROBE_BURST=n: after the readings, delete n of the world's pods (one variant only) and read the RSS after the controller freed them. */
const burst = Number(process.env["PROBE_BURST"] ?? 0)
const chosen = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ["image", "image-tsc"]
if (burst > 0 && chosen.length !== 1) throw new Error("PROBE_BURST deletes pods of the world: give one variant")
/** PROBE_CHURN=r: deletions per second, one at a time, for PROBE_CHURN_SECONDS. */
const churnRate = Number(process.env["PROBE_CHURN"] ?? 0)
const churnSeconds = Number(process.env["PROBE_CHURN_SECONDS"] ?? 300)
/** PROBE_WORKERS=n: the controller's --workers (its default otherwise). */
const workers = process.env["PROBE_WORKERS"]
/** PROBE_CHURN_SNAPSHOT=1: one heap snapshot a minute into the churn (what is live while the RSS is up). */
const churnSnapshot = process.env["PROBE_CHURN_SNAPSHOT"] === "1"
if (churnRate > 0 && chosen.length !== 1) throw new Error("PROBE_CHURN deletes pods of the world: give one variant")
for (const v of chosen) if (!(v in VARIANTS)) throw new Error(`unknown variant ${v}; known: ${Object.keys(VARIANTS).join(", ")}`)
const pods = Number(process.env["PROBE_PODS"] ?? 10_000)
const log = (line: string) => process.stderr.write(`[rss-probe] ${line}\n`)
const MiB = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`
/**
 * Addresses held in the pools, as the controller's cache sees them: what the waits count freed
 * addresses by. ips_freed_total can fall short: a patch that timed out although the server applied
 * it is retried, finds the entries gone, and frees (and counts) nothing.
 */
const USED = "whereabouts_controller_pool_used"
/** One sample of a /metrics text; `series` is a regex of the name and labels. */
const gauge = (text: string, series: string) => Number(new RegExp(`^${series} (\\S+)`, "m").exec(text)?.[1] ?? Number.NaN)

/** Has the controller write a heap snapshot (SIGUSR2), waits for it and logs what is live in it. */
const heapSnapshot = async (pid: number, snapDir: string): Promise<void> => {
  process.kill(pid, "SIGUSR2")
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
  for (const k of summary.byStringKind) log(`    strings, ${k.kind}: ${MiB(k.bytes)} (${k.count})`)
}

// tsc's output only for the variants that run it; the bundle for the rest.
if (chosen.some((v) => VARIANTS[v]!.program === "tsc")) {
  execFileSync(path.join(ROOT, "node_modules/.bin/tsc"), ["-p", path.join(ROOT, "tsconfig.build.json"), "--outDir", path.join(ROOT, "bench/.build")], { cwd: ROOT, stdio: "inherit" })
}
const BUNDLE = await bundle(path.join(ROOT, "bench/.build"))
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
      env: { LOG_LEVEL: "info", ...VARIANTS[variant]!.env, ...(workers === undefined ? {} : { WORKERS: workers }) },
      nodeArgs: ["--max-old-space-size=205", ...VARIANTS[variant]!.flags, "--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${snapDir}`],
      script: VARIANTS[variant]!.program === "bundle" ? BUNDLE : path.join(ROOT, "bench/.build/programs/main.js")
    })
    try {
      const started = Date.now()
      await p.ready(300_000)
      log(`${variant}: ready after ${Date.now() - started} ms`)
      await waitMetric(p, (s) => sum(s, "whereabouts_controller_sweeps_total") >= 1, "start-up sweep", 300_000, 200)
      log(`${variant}: VmRSS after the start-up sweep ${MiB(p.memory().rss)}`)
      await sleep(10_000)
      const rss = p.memory()
      const text = await p.metricsText()
      log(`${variant}: VmRSS ${MiB(rss.rss)} (peak ${MiB(rss.hwm)})`)
      for (const m of ["nodejs_heap_size_total_bytes", "nodejs_heap_size_used_bytes", "nodejs_external_memory_bytes"]) log(`  ${m} ${MiB(gauge(text, m))}`)
      for (const space of ["new", "old", "code", "large_object", "read_only", "trusted", "trusted_large_object"]) {
        const total = gauge(text, `nodejs_heap_space_size_total_bytes\\{space="${space}"\\}`)
        const used = gauge(text, `nodejs_heap_space_size_used_bytes\\{space="${space}"\\}`)
        if (Number.isFinite(total)) log(`  space ${space}: ${MiB(used)} used of ${MiB(total)}`)
      }
      for (const wait of [20_000, 30_000]) {
        await sleep(wait)
        log(`${variant}: VmRSS ${MiB(p.memory().rss)} after another ${wait / 1000} s`)
      }
      for (const k of smapsSummary(p.pid).byKind.slice(0, 7)) log(`  mapped ${k.kind}: ${MiB(k.rss)} (${k.mappings} mappings)`)
      for (const b of binaryResidency(p.pid).slice(0, 5)) log(`    of the node binary, ${b.part}: ${MiB(b.rss)}`)
      if (burst > 0) {
        // A mass deletion with no sweep after it: how far the heap regrows, and whether it stays.
        const usedBefore = sum(await p.scrape(), USED)
        const doomed = Array.from({ length: burst }, (_, i) => ({ namespace: RSS_NAMESPACE, name: `web-${i}` }))
        await Effect.runPromise(deleteAll(doomed).pipe(Effect.provide(driverLayer(plane))))
        await waitMetric(p, (m) => usedBefore - sum(m, USED) >= burst * 5, `${burst} pods freed`, 300_000, 200)
        log(`${variant}: ${burst} pods deleted and freed: VmRSS ${MiB(p.memory().rss)} (peak ${MiB(p.memory().hwm)})`)
        for (const wait of [10_000, 50_000]) {
          await sleep(wait)
          log(`${variant}: VmRSS ${MiB(p.memory().rss)} ${wait / 1000} s later`)
        }
      }
      if (churnRate > 0) {
        const n = Math.floor(churnRate * churnSeconds)
        if (burst + n > pods) throw new Error(`PROBE_CHURN needs ${burst + n} pods; the world has ${pods}`)
        const driver = ManagedRuntime.make(driverLayer(plane))
        const churnBefore = await p.scrape()
        const usedBefore = sum(churnBefore, USED)
        const start = Date.now()
        let nextReading = start + 30_000
        let churnSnapshotTaken = false
        log(`${variant}: churn, ${churnRate} deletions/s for ${churnSeconds} s: VmRSS ${MiB(p.memory().rss)} at the start`)
        for (let i = 0; i < n; i++) {
          await driver.runPromise(deleteAll([{ namespace: RSS_NAMESPACE, name: `web-${burst + i}` }]))
          if (Date.now() >= nextReading) {
            // One scrape for both readings.
            const text = await p.metricsText()
            const freed = usedBefore - sum(parseProm(text), USED)
            const heap = `heap ${MiB(gauge(text, "nodejs_heap_size_used_bytes"))} used of ${MiB(gauge(text, "nodejs_heap_size_total_bytes"))}`
            log(`${variant}: churn at ${((Date.now() - start) / 1000).toFixed(0)} s, ${i + 1} deleted, ${freed} addresses freed: VmRSS ${MiB(p.memory().rss)} (peak ${MiB(p.memory().hwm)}), ${heap}`)
            nextReading += 30_000
            if (churnSnapshot && !churnSnapshotTaken && Date.now() - start >= 60_000) {
              churnSnapshotTaken = true
              log(`${variant}: heap snapshot during the churn (the controller pauses while it is written)`)
              await heapSnapshot(p.pid, snapDir)
            }
          }
          await sleep(Math.max(0, start + ((i + 1) * 1000) / churnRate - Date.now()))
        }
        await driver.dispose()
        await waitMetric(p, (m) => usedBefore - sum(m, USED) >= n * 5, `${n} churned pods freed`, 300_000, 200)
        log(`${variant}: churn done, all freed: VmRSS ${MiB(p.memory().rss)} (peak ${MiB(p.memory().hwm)})`)
        // What the controller asked the API server for during the churn, by verb and resource.
        const asked = delta(churnBefore, await p.scrape(), "whereabouts_controller_api_requests_total", ["verb", "resource"])
        log(`${variant}: API requests during the churn: ${Object.entries(asked).map(([k, v]) => `${k} ${v}`).join(", ")}`)
        for (const wait of [10_000, 50_000]) {
          await sleep(wait)
          const text = await p.metricsText()
          log(`${variant}: VmRSS ${MiB(p.memory().rss)} ${wait / 1000} s later; heap ${MiB(gauge(text, "nodejs_heap_size_used_bytes"))} used of ${MiB(gauge(text, "nodejs_heap_size_total_bytes"))}`)
          for (const k of smapsSummary(p.pid).byKind.slice(0, 4)) log(`  mapped ${k.kind}: ${MiB(k.rss)} (${k.mappings} mappings)`)
        }
      }
      if (!snapshot) continue
      await heapSnapshot(p.pid, snapDir)
    } finally {
      await p.stop()
    }
  }
} finally {
  await plane.stop()
}
process.exit(0)
