/**
 * `npm run bench:apiserver`: the scenarios against a real kube-apiserver + etcd started through
 * the test harness (test/live/cluster.ts; binaries from scripts/envtest-assets.sh), CRDs from
 * deploy/ installed. The controller runs as a process exactly as deployed (src/programs/main.ts
 * run; the compiled build for the memory measurement), the baseline as `node bench/baseline.ts run`,
 * both configured by the same environment variables. Writes bench/results/apiserver.json and the
 * tables in BENCHMARKS.md.
 *
 *   BENCH_FULL=1     also runs the baseline at full mass-deletion scale (5,000 pods: ~8 min alone)
 *   BENCH_SCALE=quick  a smoke test at small scale (results not written)
 *   UPSTREAM_PODS=n  pods per run of the comparison with upstream's pod controller (bench/lib/upstream.ts)
 *   BENCH_UPSTREAM=0 leaves that comparison out (it is also left out, with a log line, when its
 *                    binary cannot be had: scripts/upstream-controlloop.sh)
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { Cause, Effect, Layer, type Scope } from "effect"
import * as ControllerConfig from "../src/services/ControllerConfig.ts"
import { KubeApi } from "../src/services/KubeApi.ts"
import { layerLive } from "../src/services/KubeApiLive.ts"
import { type BenchPlane, cpuSeconds, etcdVersion, startBenchPlane } from "./lib/controlplane.ts"
import { apiserverEnv, type BenchEnv } from "./lib/env.ts"
import { apiserverRequests, driverLayer, excessOver } from "./lib/live.ts"
import { ROOT } from "./lib/paths.ts"
import { spawnContender, waitMetric } from "./lib/proc.ts"
import { sum } from "./lib/prom.ts"
import { type Row, type Section, machine, table, yesNo } from "./lib/results.ts"
import { conflictRows, fmt, isolatedRows, massRows, ms, rateRows, ratio, sec, singleRows, spread, syncRow, writeRows } from "./lib/rows.ts"
import { buildSteadyWorld } from "./lib/rssworld.ts"
import { type MassRun, informerSync, isolatedPod, massDeletion, singleDeletions } from "./lib/scenarios.ts"
import { imageNodeFlags } from "./lib/image.ts"
import { makePhases } from "./lib/phases.ts"
import { bundle } from "../scripts/build.ts"
import { upstreamComparison } from "./lib/upstream.ts"

const quick = process.env["BENCH_SCALE"] === "quick"
const full = process.env["BENCH_FULL"] === "1"
const S = quick
  ? { mass: 500, reps: 1, same: 200, sameReps: 1, conflict: 200, single: 100, singleDefault: 50, defaultPods: 60, steadyPods: 1_000, perPod: 5, upstream: 20 }
  : { mass: 5_000, reps: 3, same: 1_000, sameReps: 3, conflict: 1_000, single: 1_000, singleDefault: 150, defaultPods: 200, steadyPods: 10_000, perPod: 5, upstream: 100 }
if (process.env["UPSTREAM_PODS"] !== undefined) S.upstream = Number(process.env["UPSTREAM_PODS"])
const RAISED = { qps: 500, burst: 1_000 }
const DEFAULT = { qps: 20, burst: 30 }
const { phase, log, finish } = makePhases("bench:apiserver")

log("bundling the controller as the image's build does (scripts/build.ts) into bench/.build")
const DIST = await bundle(path.join(ROOT, "bench/.build"))

log("starting etcd + kube-apiserver (scripts/envtest-assets.sh; a cold build takes minutes)")
const plane: BenchPlane = await startBenchPlane()
// Ctrl-C or a kill: exit through process.exit, whose hooks stop the API server, etcd and contenders.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
const etcd = etcdVersion(plane.assets)
log(`kube-apiserver ${plane.version}, etcd ${etcd}, ${plane.server}`)
const { env, logDir } = apiserverEnv(plane)
log(`contender logs in ${logDir}`)
const serverCounts = () => apiserverRequests(plane)
const driver = driverLayer(plane)
const run = <A>(f: (env: BenchEnv) => Effect.Effect<A, Error, KubeApi | Scope.Scope>): Promise<A> =>
  Effect.runPromise(
    Effect.scoped(f(env)).pipe(
      Effect.provide(driver),
      Effect.catchAllCause((cause) => Effect.die(new Error(Cause.pretty(cause))))
    )
  )

const rows: Array<Row> = []
const sections: Array<Section> = []
const data: Record<string, unknown> = {}
const mass = (kind: "ours" | "baseline", pods: number, label: string, limits = RAISED, extra: { allocatorRate?: number; serverRates?: boolean } = {}) =>
  run((e) => massDeletion(e, kind, { pods, pools: 10, limits, label, serverCounts, ...extra }))

try {
  // --- mass deletion at full scale ----------------------------------------------------------
  phase(`mass deletion: ${S.mass} pods over 10 pools, QPS ${RAISED.qps}/burst ${RAISED.burst}, controller ×${S.reps}${full ? ", baseline ×1" : ""}`)
  const bigOurs: Array<MassRun> = []
  const bigBase: Array<MassRun> = []
  for (let i = 0; i < S.reps; i++) {
    const r = await mass("ours", S.mass, `big-ours-${i}`)
    bigOurs.push(r)
    log(`  ours #${i + 1}: deletes ${fmt(r.deleteWindowMs / 1000)} s, then all free after ${fmt(Math.max(r.poolFreedMs, r.reservationsFreedMs) / 1000)} s`)
  }
  if (full) {
    phase(`mass deletion: ${S.mass} pods over 10 pools, baseline ×1 (BENCH_FULL=1)`)
    const r = await mass("baseline", S.mass, "big-baseline-0", RAISED, {})
    bigBase.push(r)
    log(`  baseline: deletes ${fmt(r.deleteWindowMs / 1000)} s, then all free after ${fmt(Math.max(r.poolFreedMs, r.reservationsFreedMs) / 1000)} s`)
  }
  data["massDeletion"] = { ours: bigOurs, baseline: bigBase }

  // --- the same comparison at a scale the baseline finishes in reasonable time --------------
  phase(`mass deletion: ${S.same} pods over 10 pools, controller and baseline ×${S.sameReps}, alternating`)
  const sameOurs: Array<MassRun> = []
  const sameBase: Array<MassRun> = []
  for (let i = 0; i < S.sameReps; i++) {
    for (const kind of ["ours", "baseline"] as const) {
      const r = await mass(kind, S.same, `same-${kind}-${i}`)
      ;(kind === "ours" ? sameOurs : sameBase).push(r)
      log(`  ${kind} #${i + 1}: all free ${fmt(Math.max(r.poolFreedMs, r.reservationsFreedMs) / 1000)} s after the last delete`)
    }
  }
  data["massDeletionSameScale"] = { ours: sameOurs, baseline: sameBase }

  const big = massRows(`mass deletion, ${S.mass} pods / 10 pools, QPS ${RAISED.qps}/burst ${RAISED.burst}`, bigOurs, bigBase, { seconds: 30, ...(full ? { times: 10 } : {}) })
  // The ≥ 10× target is set at 5,000 pods; only when that baseline was not measured does the
  // same-scale run stand in for it (the gap shrinks with scale: the baseline pays per IP, we per batch).
  const same = massRows(`mass deletion, ${S.same} pods / 10 pools, QPS ${RAISED.qps}/burst ${RAISED.burst}`, sameOurs, sameBase, full ? {} : { times: 10 })
  rows.push(...big.rows, ...same.rows)
  rows.push(...writeRows(`API writes per freed IP (${S.mass}-pod runs${full ? "" : `; baseline from the ${S.same}-pod runs`})`, bigOurs, full ? bigBase : sameBase))
  sections.push({
    title: "Mass deletion (real API server)",
    body: `Pods started by the CNI simulation in bulk (\`bulkStart\`: pods with realistic specs and both Multus annotations, the plugin's own \`assignIP\`, one guarded write per pool, one reservation per IP) in a namespace of their own; the contender is started (and, for the controller, its start-up sweep has run); then every pod is deleted (16 deletes in flight, grace 0 — no kubelet here) and the benchmark's own watch on pools and reservations timestamps when the last entry and the last reservation of the deleted pods went. "→ Events written" is when the contender's \`ips_freed_total\` reached the count. Calls are the contender's own \`api_requests_total\` (watches and leader-election leases left out); the API server's \`apiserver_request_total\` agreed on every write count (JSON below). CPU seconds per process over the run, from /proc.\n\nAt ${S.mass} pods the baseline needs minutes per run${full ? " (measured once, with `BENCH_FULL=1`)" : " and runs only with `BENCH_FULL=1`"}; the ${S.same}-pod runs compare both at the same scale, alternating, ${S.sameReps} times each.\n\n${big.body}\n\n${same.body}`
  })

  // --- default client limit -----------------------------------------------------------------
  phase(`default client limit: ${S.defaultPods} pods at QPS ${DEFAULT.qps}/burst ${DEFAULT.burst}, API server sampled every second`)
  const defOurs = await mass("ours", S.defaultPods, "default-ours", DEFAULT, { serverRates: true })
  const defBase = await mass("baseline", S.defaultPods, "default-base", DEFAULT, { serverRates: true })
  data["defaultLimit"] = { ours: defOurs, baseline: defBase }
  const defMass = massRows(`mass deletion, ${S.defaultPods} pods / 10 pools, default QPS ${DEFAULT.qps}/burst ${DEFAULT.burst}`, [defOurs], [defBase])
  rows.push(...defMass.rows)
  rows.push(...rateRows(`client rate limit under mass deletion (QPS ${DEFAULT.qps}/burst ${DEFAULT.burst})`, defOurs, defBase, "server"))
  rows.push(...rateRows(`client rate limit under mass deletion (QPS ${DEFAULT.qps}/burst ${DEFAULT.burst})`, defOurs, defBase, "contender"))
  const bigRate = bigOurs[0]
  if (bigRate !== undefined) {
    rows.push({
      scenario: `client rate limit under mass deletion (QPS ${RAISED.qps}/burst ${RAISED.burst})`,
      metric: "peak requests/s, 1 s / 10 s windows · most requests beyond QPS × T in any window between samples (contender's counter, first full-scale run)",
      ours: `${fmt(bigRate.rates.peak)} / ${fmt(bigRate.rates.max10s)} · ${bigRate.rates.points === undefined ? "–" : fmt(excessOver(bigRate.rates.points, RAISED.qps))}`,
      baseline: bigBase[0] === undefined ? "–" : `${fmt(bigBase[0].rates.peak)} / ${fmt(bigBase[0].rates.max10s)}`,
      ratio: "–",
      target: `QPS ${RAISED.qps}, burst ${RAISED.burst}: ≤ ${RAISED.burst} beyond QPS × T`,
      met: yesNo(bigRate.rates.points === undefined ? undefined : excessOver(bigRate.rates.points, RAISED.qps) <= RAISED.burst)
    })
  }
  const perIpSeconds = (r: MassRun) => Math.max(r.poolFreedMs, r.reservationsFreedMs) + r.deleteWindowMs
  sections.push({
    title: "Default client limit (QPS 20/burst 30) and measured request rates",
    body: `${S.defaultPods} pods deleted at once with both contenders at the default limit. Request rates: the contender's \`api_requests_total\` (no watches, no leases) and, independently, the API server's \`apiserver_request_total\` (everything but the benchmark's own pod deletions, watches, leases and non-resource paths), both sampled every second. At this limit every freed IP costs at least one reservation delete and one Event create, two tokens: ${S.mass} pods need ≥ ${fmt((2 * S.mass - RAISED.burst + DEFAULT.burst) / DEFAULT.qps)} s of tokens for the controller (the baseline's four per IP, twice that) — the 30 s target is only reachable with a raised limit, as measured above.\n\n${defMass.body}\n\n${table(
      ["contender", "first delete → all free", "requests (contender)", "per-second, contender", "per-second, API server"],
      [defOurs, defBase].map((r) => [r.kind, sec(perIpSeconds(r)), r.rates.total, r.rates.perSecond.join(" "), r.serverRates?.perSecond.join(" ") ?? "–"])
    )}`
  })

  // --- conflicts ------------------------------------------------------------------------------
  phase(`conflicts: ${S.conflict} pods deleted while the CNI simulation starts 10 pods/s in the same pools`)
  const confOurs = await mass("ours", S.conflict, "conflict-ours", RAISED, { allocatorRate: 10 })
  const confBase = await mass("baseline", S.conflict, "conflict-base", RAISED, { allocatorRate: 10 })
  data["conflicts"] = { ours: confOurs, baseline: confBase }
  const conf = conflictRows(`allocator adds 10 IPs/s to the same pools (${S.conflict}-pod deletion)`, confOurs, confBase)
  rows.push(...conf.rows)
  sections.push({
    title: "Conflicts with a concurrent allocator (real API server)",
    body: `The mass deletion of ${S.conflict} pods while the CNI simulation (\`startPod\`: GET pool, resourceVersion-guarded JSON patch with retry, reservation, network-status) starts 10 single-interface pods per second, round-robin in the same 10 pools, from the first delete until every address of the deleted pods is free. A conflict is a pool patch answered 422 (a failed \`test\` op). At rest: every live pod's status IPs are held for it and have their reservation, nothing belongs to a deleted pod, no IP is listed twice.\n\n${conf.body}`
  })

  // --- single deletions -----------------------------------------------------------------------
  phase(`single deletions at 50/s: ${S.single} pods at QPS ${RAISED.qps}, ${S.singleDefault} pods at the default limit`)
  const singleOurs = await run((e) => singleDeletions(e, "ours", { pods: S.single, pools: 10, rate: 50, limits: RAISED, label: "single-ours" }))
  const singleBase = await run((e) => singleDeletions(e, "baseline", { pods: S.single, pools: 10, rate: 50, limits: RAISED, label: "single-base" }))
  const singleDefOurs = await run((e) => singleDeletions(e, "ours", { pods: S.singleDefault, pools: 10, rate: 50, limits: DEFAULT, label: "single-def-ours" }))
  const singleDefBase = await run((e) => singleDeletions(e, "baseline", { pods: S.singleDefault, pools: 10, rate: 50, limits: DEFAULT, label: "single-def-base" }))
  data["singleDeletions"] = { ours: singleOurs, baseline: singleBase, oursDefault: singleDefOurs, baselineDefault: singleDefBase }
  const single = singleRows(`single deletions at 50/s, QPS ${RAISED.qps}/burst ${RAISED.burst}`, singleOurs, singleBase, { p50: 50, p99: 500 })
  const singleDef = singleRows(`single deletions at 50/s, default QPS ${DEFAULT.qps}/burst ${DEFAULT.burst} (${S.singleDefault} pods)`, singleDefOurs, singleDefBase, { p50: 50, p99: 500 })
  rows.push(...single.rows, ...singleDef.rows)
  sections.push({
    title: "Single deletions at 50/s (real API server)",
    body: `Pods over 10 pools, deleted one every 20 ms. Per pod: delete issued → the benchmark's watch sees its pool entry (first line) and its reservation (second line) gone. At the default limit a deletion costs the controller at least three tokens (pod re-check, reservation delete, Event), so 50/s outruns 20 tokens/s: the queue grows for as long as deletions come, which the ${S.singleDefault}-pod run shows.\n\n${single.body}\n\n${singleDef.body}`
  })

  // --- one isolated pod -----------------------------------------------------------------------
  phase("isolated pod: API calls for one single-interface pod")
  const isoOurs = await run((e) => isolatedPod(e, "ours", { samples: 3, background: 50, limits: DEFAULT, label: "iso-ours" }))
  const isoBase = await run((e) => isolatedPod(e, "baseline", { samples: 3, background: 50, limits: DEFAULT, label: "iso-base" }))
  data["isolatedPod"] = { ours: isoOurs, baseline: isoBase }
  const iso = isolatedRows("one isolated single-interface pod (default limit)", isoOurs, isoBase)
  rows.push(...iso.rows)
  sections.push({
    title: "One isolated pod (real API server)",
    body: `A pod started by the CNI simulation (\`startPod\`, one interface) among 50 others, deleted alone a second after it started; three samples. Calls counted by the contender's \`api_requests_total\`.\n\n${iso.body}`
  })

  // --- upstream's own pod controller on the same API server -----------------------------------
  if (process.env["BENCH_UPSTREAM"] !== "0") {
    phase(`upstream whereabouts pod controller and the controller: ${S.upstream} pods / 10 pools on one node, as released and at QPS ${RAISED.qps}`)
    const up = await upstreamComparison(env, plane, logDir, run, { pods: S.upstream, pools: 10, reps: 1, defaults: DEFAULT, raised: RAISED, log })
    if (typeof up === "string") log(`  left out: ${up}`)
    else {
      data["upstream"] = { binary: up.binary, runs: up.runs }
      rows.push(...up.rows)
      sections.push(up.section)
    }
  }

  // --- steady state: RSS and informer sync ----------------------------------------------------
  const memoryOf = async (label: string, kind: "ours" | "baseline", script: string | undefined, nodeArgs: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) => {
    const t = performance.now()
    const p = await spawnContender(kind, { kubeconfig: plane.kubeconfigPath, qps: DEFAULT.qps, burst: DEFAULT.burst, logDir, label, env: { LOG_LEVEL: "info", ...env }, nodeArgs, ...(script === undefined ? {} : { script }) })
    try {
      await p.ready(300_000)
      const readyMs = performance.now() - t
      if (kind === "ours") await waitMetric(p, (s) => sum(s, "whereabouts_controller_sweeps_total") >= 1, "start-up sweep", 300_000, 200)
      const afterSync = p.memory()
      await sleep(10_000)
      const settled = p.memory()
      return { label, kind, readyMs, rssAfterSync: afterSync.rss, rss: settled.rss, hwm: settled.hwm, cpu: cpuSeconds(p.pid) }
    } finally {
      await p.stop()
    }
  }
  const image = imageNodeFlags()
  const HEAP_CAP = image.heapCap
  phase("idle controller: RSS before the steady world exists")
  const idle = await memoryOf("rss-ours-dist-idle", "ours", DIST, image.flags, image.env)
  phase(`steady world: ${S.steadyPods} pods × ${S.perPod} networks (10 pools × ${(S.steadyPods * S.perPod) / 10} allocations, as many reservations), with status`)
  const world = await Effect.runPromise(buildSteadyWorld(plane, S.steadyPods, 10, S.perPod).pipe(Effect.provide(driver)))
  log(`  built in ${fmt(world.ms / 1000)} s`)
  const rss = [
    await memoryOf("rss-ours-dist", "ours", DIST, image.flags, image.env),
    await memoryOf("rss-ours-dist-v8-young", "ours", DIST, image.flags.filter((f) => !f.startsWith("--max-semi-space-size")), image.env),
    await memoryOf("rss-ours-ts", "ours", undefined, []),
    await memoryOf("rss-baseline-ts", "baseline", undefined, [])
  ]
  data["rss"] = { world, idle, runs: rss }
  const dist = rss[0]!
  const v8young = rss[1]!
  const oursTs = rss[2]!
  const baseTs = rss[3]!
  const MiB = (b: number) => `${fmt(b / 2 ** 20)} MiB`
  const scenario = `RSS with ${S.steadyPods} pods cached, 10 pools × ${(S.steadyPods * S.perPod) / 10} allocations`
  const memRow = (metric: string, r: { readonly rss: number; readonly hwm: number }, extra: Partial<Row> = {}): Row => ({
    scenario,
    metric,
    ours: `${MiB(r.rss)} (peak ${MiB(r.hwm)})`,
    baseline: "–",
    ratio: "–",
    target: "–",
    met: "–",
    ...extra
  })
  rows.push(
    memRow("controller process (the image's bundle, flags and environment), 10 s after sync and start-up sweep", dist, { target: "≤ 150 MiB", met: yesNo(dist.rss <= 150 * 2 ** 20) }),
    memRow("the same process idle, before the world exists (the fixed cost: runtime, libraries, code)", idle),
    memRow("the same without the image's --max-semi-space-size (V8 sizes the young generation from the host)", v8young),
    memRow("both from TypeScript sources (node strips types), no node flags, for the comparison", oursTs, {
      baseline: `${MiB(baseTs.rss)} (peak ${MiB(baseTs.hwm)})`,
      ratio: ratio(baseTs.rss, oursTs.rss)
    })
  )
  phase("informer sync of the steady world's pods, in this process, at the default client limit")
  const syncLayer = layerLive.pipe(Layer.provide(ControllerConfig.layerWith({ kubeconfig: plane.kubeconfigPath, apiQps: DEFAULT.qps, apiBurst: DEFAULT.burst })), Layer.orDie)
  const sync = { ours: [] as Array<number>, baseline: [] as Array<number> }
  for (let i = 0; i < 3; i++) {
    for (const kind of ["ours", "baseline"] as const) sync[kind].push((await Effect.runPromise(informerSync(kind).pipe(Effect.provide(syncLayer)))).ms)
  }
  data["informerSync"] = sync
  rows.push(syncRow(`informer sync of ${S.steadyPods} pods (real API server)`, "list (pages of 500, default limit) → synced, median (min–max)", sync))
  rows.push({
    scenario: `informer sync of ${S.steadyPods} pods (real API server)`,
    metric: "contender process start → /readyz (all four informers synced)",
    ours: ms(dist.readyMs),
    baseline: ms(baseTs.readyMs),
    ratio: "–",
    target: "–",
    met: "–"
  })
  sections.push({
    title: "Memory and informer sync (real API server)",
    body: `${S.steadyPods} pods (the realistic pods above plus a kubelet-like status written through pods/status), each attached to ${S.perPod} of 10 networks: 10 pools of ${(S.steadyPods * S.perPod) / 10} allocations and ${S.steadyPods * S.perPod} reservations (built in ${fmt(world.ms / 1000)} s). Each contender is started against it at the default limit; RSS and peak RSS (VmRSS, VmHWM from /proc) after its caches synced (controller: and its start-up sweep ran), then again 10 s later. The image's run is \`${Object.entries(image.env).filter(([k]) => k.startsWith("MALLOC_")).map(([k, v]) => `${k}=${v}`).join(" ")} node ${image.flags.join(" ")} bench/.build/main.js run\`: the bundle the image's build makes (scripts/build.ts) with the environment and node flags of its ENV and ENTRYPOINT, the heap percentage turned into the cap it gives under the deployment's memory limit (${HEAP_CAP}). The controller gives unused heap back to the OS once its caches synced, after each sweep and after a mass deletion (src/programs/memory.ts); the RSS is read 10 s after the start-up sweep. \`rss-ours-dist-idle\` ran against the same API server just before the steady world was built. Where the memory goes: \`node bench/rss-probe.ts\` builds the same world and reports the V8 heap spaces and a heap-snapshot summary. Informer sync: the pod informer alone (\`makeInformer\` over KubeApiLive at QPS 20/burst 30) in the benchmark process, three times each, alternating.\n\n${table(
      ["process", "start → ready", "RSS after sync", "RSS 10 s later", "peak RSS", "CPU s"],
      [idle, ...rss].map((r) => [r.label, ms(r.readyMs), MiB(r.rssAfterSync), MiB(r.rss), MiB(r.hwm), fmt(r.cpu)])
    )}\n\n${table(["cache", "sync runs (ms)"], [["projection (ours)", sync.ours.map((x) => fmt(x)).join(", ")], ["full objects (baseline)", sync.baseline.map((x) => fmt(x)).join(", ")]])}`
  })
} finally {
  await plane.stop()
}

finish({
  name: "apiserver",
  command: full ? "BENCH_FULL=1 npm run bench:apiserver" : "npm run bench:apiserver",
  quick,
  machine: machine({ kubeApiserver: plane.version, etcd }),
  conditions: (load) =>
    `kube-apiserver ${plane.version} and etcd ${etcd} on loopback, started by test/live/cluster.ts (\`startControlPlane\`) from \`scripts/envtest-assets.sh\`; the API server, etcd, the contender and the benchmark share the machine's ${os.cpus().length} CPUs. ${load}.`,
  rows,
  sections,
  data
})
