/**
 * Where the time of a single deletion goes on the real API server, for the single-deletion miss
 * in BENCHMARKS.md: runs the "single deletions at 50/s" scenario of `npm run bench:apiserver`
 * once for the controller with a V8 CPU profile of the controller process (`--cpu-prof`) and,
 * while the pods are being deleted, a Go CPU profile of kube-apiserver (/debug/pprof/profile,
 * summarised with `go tool pprof -top` when Go is on PATH). Prints the latencies, the CPU seconds
 * per process and both profiles' top entries.
 *
 *   node bench/single-profile.ts                 1,000 pods at 50/s, shipped defaults (as the benchmark)
 *   SINGLE_PODS=500 SINGLE_RATE=50 SINGLE_WORKERS=2 node bench/single-profile.ts
 *   SINGLE_AFTER_MASS=5000 node bench/single-profile.ts   first a mass deletion of that many pods
 *                                                         on the same API server (as the full
 *                                                         benchmark runs it after its mass runs)
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Cause, Effect } from "effect"
import { pprofTo, startBenchPlane } from "./lib/controlplane.ts"
import { summarize } from "./lib/cpuprofile.ts"
import { apiserverEnv, SHIPPED } from "./lib/env.ts"
import { driverLayer } from "./lib/live.ts"
import { histogramBetween, parseProm, type Sample } from "./lib/prom.ts"
import { STEPS, massDeletion, singleDeletions } from "./lib/scenarios.ts"
import { ms } from "./lib/stats.ts"

const pods = Number(process.env["SINGLE_PODS"] ?? 1_000)
const rate = Number(process.env["SINGLE_RATE"] ?? 50)
/** SINGLE_WORKERS=n: the controller's --workers (its default otherwise). */
const workers = process.env["SINGLE_WORKERS"] === undefined ? undefined : Number(process.env["SINGLE_WORKERS"])
/** SINGLE_AFTER_MASS=n: a mass deletion of n pods (ours, QPS 500) on the same server first. */
const afterMass = Number(process.env["SINGLE_AFTER_MASS"] ?? 0)
const log = (line: string) => process.stderr.write(`[single-profile] ${line}\n`)

const plane = await startBenchPlane()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))

try {
  const profDir = fs.mkdtempSync(path.join(os.tmpdir(), "whereabouts-cpuprof-"))
  // PROFILE_NODE_ARGS: extra node flags for the controller (to compare V8 settings).
  const extra = (process.env["PROFILE_NODE_ARGS"] ?? "").split(" ").filter((a) => a !== "")
  const { env, logDir } = apiserverEnv(plane, { nodeArgs: [...extra, "--cpu-prof", `--cpu-prof-dir=${profDir}`] })
  log(`kube-apiserver ${plane.version}; logs in ${logDir}; profiles in ${profDir}`)
  if (afterMass > 0) {
    // Its own env: that controller is not profiled (only the profiled run's profile is summarised).
    const mass = await Effect.runPromise(
      Effect.scoped(massDeletion(apiserverEnv(plane).env, "ours", { pods: afterMass, pools: 10, limits: { qps: 500, burst: 1_000 }, label: "pre" })).pipe(
        Effect.provide(driverLayer(plane)),
        Effect.catchAllCause((cause) => Effect.die(new Error(Cause.pretty(cause))))
      )
    )
    log(`mass deletion of ${afterMass} pods first: every pool entry free ${ms(mass.poolFreedMs)} after the last delete`)
  }
  // The API server's profile starts when the controller is ready (the world is built by then) and
  // lasts the deletion phase (pods/rate seconds) plus 3 s for the tracker's sync before it.
  const goProfile = path.join(profDir, "kube-apiserver.pprof")
  let pprof: Promise<void> | undefined
  // Both sides' latency histograms, read when the controller is ready and again before it stops.
  const serverScrape = async () => parseProm(await plane.metrics(), (n) => n.startsWith("apiserver_request_duration_seconds"))
  const scrapes: { server: Array<ReadonlyArray<Sample>>; controller: Array<ReadonlyArray<Sample>> } = { server: [], controller: [] }
  const scrapeBoth = (c: { readonly proc?: { readonly scrape: () => Promise<ReadonlyArray<Sample>> } }) =>
    Effect.promise(async () => {
      scrapes.server.push(await serverScrape())
      scrapes.controller.push((await c.proc?.scrape()) ?? [])
    })
  const result = await Effect.runPromise(
    Effect.scoped(
      singleDeletions(
        {
          ...env,
          start: (kind, limits, label, config) =>
            Effect.tap(env.start(kind, limits, label, workers === undefined ? config : { ...config, workers }), (c) =>
              Effect.gen(function* () {
                yield* scrapeBoth(c)
                // Finalizers run last-in first-out: this one runs before the contender is stopped.
                yield* Effect.addFinalizer(() => scrapeBoth(c))
                pprof = pprofTo(plane, `profile?seconds=${Math.ceil(pods / rate) + 3}`, goProfile, (Math.ceil(pods / rate) + 33) * 1000)
              })
            )
        },
        "ours",
        { pods, pools: 10, rate, limits: SHIPPED, label: "profile" }
      )
    ).pipe(
      Effect.provide(driverLayer(plane)),
      Effect.catchAllCause((cause) => Effect.die(new Error(Cause.pretty(cause))))
    )
  )
  await pprof
  log(`delete → pool entry free p50 ${ms(result.pool.p50)} p95 ${ms(result.pool.p95)} p99 ${ms(result.pool.p99)}; the benchmark's own DELETE p50 ${ms(result.deleteCall?.p50)} p99 ${ms(result.deleteCall?.p99)}`)
  log(`reconciles: ${JSON.stringify(result.reconciles)}; CPU seconds: ${JSON.stringify(result.cpu)}`)
  const q = (h: ReturnType<typeof histogramBetween>) =>
    h === undefined ? "none" : `n ${h.count}, mean ${ms(h.mean * 1000)}, p50 ${ms(h.quantiles[0]! * 1000)}, p95 ${ms(h.quantiles[1]! * 1000)}, p99 ${ms(h.quantiles[2]! * 1000)}`
  const [c0, c1] = [scrapes.controller[0] ?? [], scrapes.controller[1] ?? []]
  const [s0, s1] = [scrapes.server[0] ?? [], scrapes.server[1] ?? []]
  log("latency by step (histograms between the two scrapes; quantiles interpolated inside buckets):")
  for (const [label, name, labels] of STEPS) {
    const client = histogramBetween(c0, c1, name, labels)
    const { verb, resource } = labels
    // A request step also as the API server served it (to every client), under its HTTP verb.
    const server =
      verb === undefined || resource === undefined
        ? undefined
        : histogramBetween(s0, s1, "apiserver_request_duration_seconds", { verb: verb === "create" ? "POST" : verb.toUpperCase(), resource })
    if (client === undefined && server === undefined) continue
    log(`  ${label}: controller sees ${q(client)}`)
    if (server !== undefined) log(`    API server (all clients) ${q(server)}`)
  }
  log(`  benchmark's pod DELETEs, API server: ${q(histogramBetween(s0, s1, "apiserver_request_duration_seconds", { verb: "DELETE", resource: "pods" }))}`)
  const files = fs.readdirSync(profDir).filter((f) => f.endsWith(".cpuprofile"))
  for (const f of files) {
    const s = summarize(path.join(profDir, f), 25)
    log(`controller profile ${f}: ${(s.totalMs / 1000).toFixed(1)} s wall, ${((s.totalMs - s.idleMs) / 1000).toFixed(1)} s busy`)
    for (const p of s.byPackage) log(`  ${p.ms.toFixed(0).padStart(7)} ms ${p.pct.toFixed(1).padStart(5)} %  ${p.pkg}`)
    for (const p of s.byFunction) log(`  ${p.ms.toFixed(0).padStart(7)} ms ${p.pct.toFixed(1).padStart(5)} %  ${p.fn}`)
  }
  try {
    const top = execFileSync("go", ["tool", "pprof", "-top", "-nodecount=35", goProfile], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
    log(`kube-apiserver profile (go tool pprof -top):\n${top}`)
    const cum = execFileSync("go", ["tool", "pprof", "-top", "-cum", "-nodecount=60", goProfile], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
    log(`kube-apiserver profile, cumulative:\n${cum}`)
  } catch (e) {
    log(`go tool pprof unavailable (${(e as Error).message.split("\n")[0]}); the profile is ${goProfile}`)
  }
} finally {
  await plane.stop()
}
