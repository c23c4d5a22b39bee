/**
 * `npm run bench:apiserver`: the scenarios against a real kube-apiserver + etcd (bench/lib/controlplane.ts),
 * the controller as deployed (src/programs/main.ts run; the bundle for the memory measurement) and
 * the baseline (`node bench/baseline.ts run`) as processes configured alike. Writes
 * bench/results/apiserver.json and the tables in BENCHMARKS.md.
 *
 *   BENCH_FULL=1     also runs the baseline at full mass-deletion scale (5,000 pods; slow)
 *   BENCH_SCALE=quick  a smoke test at small scale (results not written)
 *
 * The comparison with upstream's pod controller is `npm run bench:upstream` (bench/upstream.ts).
 */
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Layer } from "effect"
import * as ControllerConfig from "../src/services/ControllerConfig.ts"
import { layerLive } from "../src/services/KubeApiLive.ts"
import { SHIPPED, limitsAt, startBench } from "./lib/env.ts"
import { apiserverRequests } from "./lib/controlplane.ts"
import { ROOT } from "./lib/paths.ts"
import { memoryAfterSync } from "./lib/proc.ts"
import { type Row, row, type Section, machine, table, yesNo } from "./lib/report.ts"
import { conflictRows, cpuText, fullyFreed, isolatedRows, limitsText, massRows, medSpread, rateRows, ratio, sec, singleMet, singleRows, writeRows } from "./lib/rows.ts"
import { fmt, mib, ms, spread } from "./lib/stats.ts"
import { STEADY_NODES, STEADY_PER_POD, buildSteadyWorld } from "./lib/rssworld.ts"
import { ALLOCATOR_IN_FLIGHT, type MassRun, informerSync, isolatedPod, massDeletion, singleDeletions, singleFloor, sumWhere } from "./lib/scenarios.ts"
import { imageNodeFlags } from "./lib/image.ts"
import { makePhases } from "./lib/phases.ts"
import { bundle } from "../scripts/build.ts"

if (process.argv.includes("--help")) {
  process.stdout.write("npm run bench:apiserver   the scenarios on a real kube-apiserver + etcd; environment: BENCH_FULL=1, BENCH_SCALE=quick (bench/apiserver.ts's header says what each does)\n")
  process.exit(0)
}
const quick = process.env["BENCH_SCALE"] === "quick"
const full = process.env["BENCH_FULL"] === "1"
const S = quick
  ? { mass: 500, reps: 1, same: 200, sameReps: 1, conflict: 200, single: 100, singleCapped: 50, cappedPods: 60, steadyPods: 1_000 }
  : { mass: 5_000, reps: 3, same: 1_000, sameReps: 3, conflict: 1_000, single: 1_000, singleCapped: 150, cappedPods: 200, steadyPods: 10_000 }
/** A client-side cap, as a small or shared API server may want: the former default. */
const CAPPED = limitsAt(20)
/** Whereabouts interfaces per pod in the mass deletions. */
const PER_POD = 2
const { phase, log, finish } = makePhases("bench:apiserver")

log("bundling the controller as the image's build does (scripts/build.ts) into bench/.build")
const DIST = await bundle(path.join(ROOT, "bench/.build"))

const { plane, etcd, logDir, driver, run } = await startBench(log)
const serverCounts = () => apiserverRequests(plane)

const rows: Array<Row> = []
const sections: Array<Section> = []
const data: Record<string, unknown> = {}
const mass = (kind: "ours" | "baseline", pods: number, label: string, limits = SHIPPED, extra: { allocatorRate?: number; serverRates?: boolean; perPod?: number } = {}) =>
  run((e) => massDeletion(e, kind, { pods, pools: 10, perPod: PER_POD, limits, label, serverCounts, ...extra }))

/** Events and 429s of mass-deletion runs: the headline's other two targets. */
const eventRows = (label: string, runs: ReadonlyArray<MassRun>, baseline: ReadonlyArray<MassRun>): Array<Row> => {
  const events = spread(runs.map((r) => r.eventsMs))
  const refused = (r: MassRun) => sumWhere(r.calls, ([, , code]) => code === "429")
  return [
    row(label, "last delete → every Event written (events_total{result=\"written\"}), median (min–max)", {
      ours: medSpread(runs.map((r) => r.eventsMs), sec),
      baseline: medSpread(baseline.map((r) => r.eventsMs), sec),
      ratio: baseline.length === 0 ? "–" : ratio(spread(baseline.map((r) => r.eventsMs)).median, events.median),
      target: "≤ 30 s",
      met: yesNo(runs.length === 0 ? undefined : events.max <= 30_000)
    }),
    row(label, "requests the API server answered 429 (its default API Priority and Fairness), all runs", {
      ours: String(runs.reduce((a, r) => a + refused(r), 0)),
      baseline: baseline.length === 0 ? "–" : String(baseline.reduce((a, r) => a + refused(r), 0)),
      target: "0",
      met: yesNo(runs.length === 0 ? undefined : runs.every((r) => refused(r) === 0))
    })
  ]
}

try {
  // Single deletions at the shipped defaults first, on an API server the mass runs have not grown yet
  // (each run leaves it a larger Go heap, and its GC then stalls every client: the floor shows it)
  phase(`shipped defaults: single deletions at 50/s, ${S.single} pods, on the fresh API server; and the requests alone (the floor)`)
  const singleOurs = await run((e) => singleDeletions(e, "ours", { pods: S.single, rate: 50, limits: SHIPPED, label: "single-ours" }))
  const singleBase = await run((e) => singleDeletions(e, "baseline", { pods: S.single, rate: 50, limits: SHIPPED, label: "single-base" }))
  const singleFloorFresh = await run((e) => singleFloor(e, { pods: S.single, rate: 50, label: "single-floor" }))
  log(`  ours p99 ${ms(singleOurs.pool.p99)}, baseline p99 ${ms(singleBase.pool.p99)}, the requests alone p99 ${ms(singleFloorFresh.pool.p99)} (${singleFloorFresh.failures.length} failed: ${singleFloorFresh.failures.slice(0, 3).join("; ")})`)

  phase(`shipped defaults: mass deletion of ${S.mass} pods × ${PER_POD} interfaces over 10 pools, controller ×${S.reps}${full ? ", baseline ×1" : ""}`)
  const bigOurs: Array<MassRun> = []
  const bigBase: Array<MassRun> = []
  for (let i = 0; i < S.reps; i++) {
    const r = await mass("ours", S.mass, `big-ours-${i}`)
    bigOurs.push(r)
    log(`  ours #${i + 1}: deletes ${fmt(r.deleteWindowMs / 1000)} s, then all free after ${fmt(fullyFreed(r) / 1000)} s, Events after ${fmt(r.eventsMs / 1000)} s`)
  }
  if (full) {
    phase(`shipped defaults: mass deletion of ${S.mass} pods × ${PER_POD}, baseline ×1 (BENCH_FULL=1)`)
    const r = await mass("baseline", S.mass, "big-baseline-0")
    bigBase.push(r)
    log(`  baseline: deletes ${fmt(r.deleteWindowMs / 1000)} s, then all free after ${fmt(fullyFreed(r) / 1000)} s`)
  }
  data["massDeletion"] = { ours: bigOurs, baseline: bigBase }

  // The same comparison at a scale the baseline finishes in reasonable time.
  phase(`shipped defaults: mass deletion of ${S.same} pods × ${PER_POD} over 10 pools, controller and baseline ×${S.sameReps}, alternating`)
  const sameOurs: Array<MassRun> = []
  const sameBase: Array<MassRun> = []
  for (let i = 0; i < S.sameReps; i++) {
    for (const kind of ["ours", "baseline"] as const) {
      const r = await mass(kind, S.same, `same-${kind}-${i}`)
      ;(kind === "ours" ? sameOurs : sameBase).push(r)
      log(`  ${kind} #${i + 1}: all free ${fmt(fullyFreed(r) / 1000)} s after the last delete`)
    }
  }
  data["massDeletionSameScale"] = { ours: sameOurs, baseline: sameBase }

  const bigLabel = `mass deletion at the shipped defaults, ${S.mass} pods × ${PER_POD} IPs / 10 pools`
  const sameLabel = `mass deletion at the shipped defaults, ${S.same} pods × ${PER_POD} IPs / 10 pools`
  // The ≥ 25× target is set at 5,000 pods; only when that baseline was not measured does the
  // same-scale run stand in for it (the gap shrinks with scale: the baseline pays per IP, we per batch).
  const big = massRows(bigLabel, bigOurs, bigBase, { seconds: 10, ...(full ? { times: 25 } : {}) })
  const same = massRows(sameLabel, sameOurs, sameBase, full ? {} : { times: 25 })
  rows.push(...big.rows, ...eventRows(bigLabel, bigOurs, bigBase), ...same.rows, ...eventRows(sameLabel, sameOurs, sameBase))
  rows.push(...writeRows(`API writes per freed IP (${S.mass}-pod runs${full ? "" : `; baseline from the ${S.same}-pod runs`})`, bigOurs, full ? bigBase : sameBase))
  sections.push({
    title: "Mass deletion at the shipped defaults (real API server)",
    body: `Both contenders as deploy/ ships the controller: no client-side cap (\`--api-qps 0\`), its bounds per kind of work; the baseline over the same client, uncapped too, so the difference is the design. Pods started by the CNI simulation in bulk (\`bulkStart\`: pods with realistic specs and both Multus annotations, ${PER_POD} whereabouts interfaces each on two of the 10 networks, the plugin's own \`assignIP\`, one guarded write per pool, one reservation per IP) in a namespace of their own; the contender is started (and, for the controller, its start-up sweep has run); then every pod is deleted (16 deletes in flight, grace 0 — no kubelet here) and the benchmark's own watch on pools and reservations timestamps when the last entry and the last reservation of the deleted pods went. "→ Events written" is when the contender's \`events_total{result="written"}\` reached one per freed IP. Calls are the contender's own \`api_requests_total\` (watches and leader-election leases left out), each attempt counted, a 429 too; the API server runs its default API Priority and Fairness configuration. CPU seconds per process over the run, from /proc.\n\nAt ${S.mass} pods the baseline needs minutes per run${full ? " (measured once, with `BENCH_FULL=1`)" : " and runs only with `BENCH_FULL=1`"}; the ${S.same}-pod runs compare both at the same scale, alternating, ${S.sameReps} times each.\n\n${big.body}\n\n${same.body}`
  })

  // The same stream again, now that the mass runs have grown the API server: the controller, then the requests alone.
  phase(`shipped defaults: single deletions at 50/s, ${S.single} pods, after the mass runs on the same API server; and the floor`)
  const singleOursGrown = await run((e) => singleDeletions(e, "ours", { pods: S.single, rate: 50, limits: SHIPPED, label: "single-ours-grown" }))
  const singleFloorGrown = await run((e) => singleFloor(e, { pods: S.single, rate: 50, label: "single-floor-grown" }))
  log(`  ours p99 ${ms(singleOursGrown.pool.p99)}, the requests alone p99 ${ms(singleFloorGrown.pool.p99)} (${singleFloorGrown.failures.length} failed: ${singleFloorGrown.failures.slice(0, 3).join("; ")})`)
  const single = singleRows(`single deletions at 50/s at the shipped defaults`, singleOurs, singleBase)
  rows.push(...single.rows)
  const grownLabel = "single deletions at 50/s at the shipped defaults, after the mass runs on the same API server"
  rows.push(
    row(grownLabel, "delete → address free, p50 / p99 (baseline column: the requests alone, no controller)", {
      ours: `${ms(singleOursGrown.pool.p50)} / ${ms(singleOursGrown.pool.p99)}`,
      baseline: `${ms(singleFloorGrown.pool.p50)} / ${ms(singleFloorGrown.pool.p99)}`,
      target: "≤ 50 ms / ≤ 500 ms",
      met: yesNo(singleMet(singleOursGrown))
    })
  )
  const floorTable = table(
    ["API server", "who sends the requests", "delete → pool entry free p50 / p99 / max", "reservation free p99", "requests failed for good", "CPU s (by process)"],
    [
      ["fresh (first phase)", "the controller", singleOurs] as const,
      ["fresh (first phase)", "the benchmark, as each DELETE is answered (the floor)", singleFloorFresh] as const,
      ["after the mass runs", "the controller", singleOursGrown] as const,
      ["after the mass runs", "the benchmark, as each DELETE is answered (the floor)", singleFloorGrown] as const
    ].map(([when, who, r]) => [
      when,
      who,
      `${ms(r.pool.p50)} / ${ms(r.pool.p99)} / ${ms(r.pool.max)}${r.completed === r.pods ? "" : ` (${r.completed} of ${r.pods} freed)`}`,
      ms(r.reservation.p99),
      "failures" in r ? String(r.failures.length) : "–",
      cpuText(r.cpu)
    ])
  )

  phase(`shipped defaults: conflicts, ${S.conflict} pods deleted while the CNI simulation starts 10 pods/s in the same pools`)
  const confOurs = await mass("ours", S.conflict, "conflict-ours", SHIPPED, { allocatorRate: 10, perPod: 1 })
  const confBase = await mass("baseline", S.conflict, "conflict-base", SHIPPED, { allocatorRate: 10, perPod: 1 })
  data["conflicts"] = { ours: confOurs, baseline: confBase }
  const conf = conflictRows(`allocator adds 10 IPs/s to the same pools (${S.conflict}-pod deletion)`, confOurs, confBase)
  rows.push(...conf.rows)
  sections.push({
    title: "Conflicts with a concurrent allocator (real API server)",
    body: `The mass deletion of ${S.conflict} single-interface pods at the shipped defaults while the CNI simulation (\`startPod\`: GET pool, resourceVersion-guarded JSON patch with retry, reservation, network-status) starts 10 single-interface pods per second (a tick is skipped while ${ALLOCATOR_IN_FLIGHT} starts are still running), round-robin in the same 10 pools, from the first delete until every address of the deleted pods is free. A conflict is a pool patch answered 422 (a failed \`test\` op). At rest: every live pod's status IPs are held for it and have their reservation, nothing belongs to a deleted pod, no IP is listed twice.\n\n${conf.body}`
  })

  phase("isolated pod: API calls for one single-interface pod")
  const isoOurs = await run((e) => isolatedPod(e, "ours", "iso-ours"))
  const isoBase = await run((e) => isolatedPod(e, "baseline", "iso-base"))
  data["isolatedPod"] = { ours: isoOurs, baseline: isoBase }
  const iso = isolatedRows("one isolated single-interface pod (shipped defaults)", isoOurs, isoBase)
  rows.push(...iso.rows)
  sections.push({
    title: "One isolated pod (real API server)",
    body: `A pod started by the CNI simulation (\`startPod\`, one interface) among 50 others, deleted alone a second after it started; three samples. Calls counted by the contender's \`api_requests_total\`.\n\n${iso.body}`
  })

  phase(`with a client-side cap (${limitsText(CAPPED)}): ${S.cappedPods} pods × ${PER_POD} deleted at once, API server sampled every second; single deletions at 50/s, ${S.singleCapped} pods`)
  const capOurs = await mass("ours", S.cappedPods, "capped-ours", CAPPED, { serverRates: true })
  const capBase = await mass("baseline", S.cappedPods, "capped-base", CAPPED, { serverRates: true })
  const singleCapOurs = await run((e) => singleDeletions(e, "ours", { pods: S.singleCapped, rate: 50, limits: CAPPED, label: "single-cap-ours" }))
  const singleCapBase = await run((e) => singleDeletions(e, "baseline", { pods: S.singleCapped, rate: 50, limits: CAPPED, label: "single-cap-base" }))
  data["capped"] = { ours: capOurs, baseline: capBase, singleOurs: singleCapOurs, singleBaseline: singleCapBase }
  data["singleDeletions"] = {
    ours: singleOurs,
    baseline: singleBase,
    floor: singleFloorFresh,
    oursAfterMass: singleOursGrown,
    floorAfterMass: singleFloorGrown,
    oursCapped: singleCapOurs,
    baselineCapped: singleCapBase
  }
  const capMass = massRows(`mass deletion with a cap, ${S.cappedPods} pods × ${PER_POD} IPs / 10 pools, ${limitsText(CAPPED)}`, [capOurs], [capBase])
  const singleCap = singleRows(`single deletions at 50/s with a cap, ${limitsText(CAPPED)} (${S.singleCapped} pods)`, singleCapOurs, singleCapBase)
  rows.push(...capMass.rows, ...singleCap.rows)
  rows.push(...rateRows(`client-side cap under mass deletion (${limitsText(CAPPED)})`, capOurs, capBase, "server"))
  rows.push(...rateRows(`client-side cap under mass deletion (${limitsText(CAPPED)})`, capOurs, capBase, "contender"))
  sections.push({
    title: "Single deletions at 50/s (real API server)",
    body: `Pods over 10 pools, deleted one every 20 ms. Per pod: delete issued → the benchmark's watch sees its pool entry (first line) and its reservation (second line) gone. At the shipped defaults, then under a client-side cap of ${limitsText(CAPPED)}: there a deletion costs the controller at least three tokens (pod re-check, reservation delete, Event), so 50/s outruns 20 tokens/s and the queue grows for as long as deletions come, which the ${S.singleCapped}-pod run shows.\n\nThe shipped-defaults runs come first, on an API server the mass runs have not yet grown; the same stream runs again after them. Beside the controller, the floor (\`singleFloor\`): no controller, the benchmark itself sends what the controller sends for each pod (re-check GET, reservation DELETE, then the guarded pool patch and the Event) as soon as the pod's DELETE is answered, with a pod watch and a pool watch open. What the floor takes is what this machine's API server, in that state, takes for the requests alone.\n\n${floorTable}\n\n${single.body}\n\n${singleCap.body}`
  })
  sections.push({
    title: `With a client-side cap (${limitsText(CAPPED)}) and measured request rates`,
    body: `What \`--api-qps ${CAPPED.qps}\` (bursts of ${CAPPED.burst}; the default before the bounds per kind of work replaced it) costs: ${S.cappedPods} pods × ${PER_POD} interfaces deleted at once with both contenders at that cap. Request rates: the contender's \`api_requests_total\` (no watches, no leases) and, independently, the API server's \`apiserver_request_total\` (everything but the benchmark's own pod deletions, watches, leases and non-resource paths), both sampled every second. Under the cap every freed IP costs at least one reservation delete and one Event write, two tokens: ${S.mass} pods × ${PER_POD} need ≥ ${fmt((2 * S.mass * PER_POD - CAPPED.burst) / CAPPED.qps)} s of tokens for the controller (the baseline's four per IP, twice that).\n\n${capMass.body}\n\n${table(
      ["contender", "first delete → all free", "requests (contender)", "per-second, contender", "per-second, API server"],
      [capOurs, capBase].map((r) => [r.kind, sec(fullyFreed(r) + r.deleteWindowMs), r.rates.total, r.rates.perSecond.join(" "), r.serverRates?.perSecond.join(" ") ?? "–"])
    )}`
  })

  const memoryOf = (label: string, kind: "ours" | "baseline", script: string | undefined, nodeArgs: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
    memoryAfterSync(kind, { kubeconfig: plane.kubeconfigPath, qps: SHIPPED.qps, burst: SHIPPED.burst, logDir, label, env, nodeArgs, ...(script === undefined ? {} : { script }) })
  const image = imageNodeFlags()
  phase("idle controller: RSS before the steady world exists")
  const idle = await memoryOf("rss-ours-dist-idle", "ours", DIST, image.flags, image.env)
  phase(`steady world: ${S.steadyPods} pods × ${STEADY_PER_POD} networks (10 pools × ${(S.steadyPods * STEADY_PER_POD) / 10} allocations, as many reservations), with status`)
  const world = await Effect.runPromise(buildSteadyWorld(plane, S.steadyPods).pipe(Effect.provide(driver)))
  log(`  built in ${fmt(world.ms / 1000)} s`)
  const rss = [
    await memoryOf("rss-ours-dist", "ours", DIST, image.flags, image.env),
    await memoryOf("rss-ours-dist-v8-young", "ours", DIST, image.flags.filter((f) => !f.startsWith("--max-semi-space-size")), image.env),
    await memoryOf("rss-ours-ts", "ours", undefined, []),
    await memoryOf("rss-baseline-ts", "baseline", undefined, [])
  ] as const
  data["rss"] = { world, idle, runs: rss }
  const [dist, v8young, oursTs, baseTs] = rss
  const scenario = `RSS with ${S.steadyPods} pods cached, 10 pools × ${(S.steadyPods * STEADY_PER_POD) / 10} allocations`
  const memRow = (metric: string, r: { readonly rss: number; readonly hwm: number }, extra: Partial<Row> = {}) =>
    row(scenario, metric, { ours: `${mib(r.rss)} (peak ${mib(r.hwm)})`, baseline: "–", ...extra })
  rows.push(
    memRow("controller process (the image's bundle, flags and environment), 10 s after sync and start-up sweep", dist, { target: "≤ 150 MiB", met: yesNo(dist.rss <= 150 * 2 ** 20) }),
    memRow("the same process idle, before the world exists (the fixed cost: runtime, libraries, code)", idle),
    memRow("the same without the image's --max-semi-space-size (V8 sizes the young generation from the host)", v8young),
    memRow("both from TypeScript sources (node strips types), no node flags, for the comparison", oursTs, {
      baseline: `${mib(baseTs.rss)} (peak ${mib(baseTs.hwm)})`,
      ratio: ratio(baseTs.rss, oursTs.rss)
    })
  )
  phase("informer sync of the steady world's pods, in this process, at the default client limit")
  const syncLayer = layerLive.pipe(Layer.provide(ControllerConfig.layerWith({ kubeconfig: plane.kubeconfigPath, apiQps: SHIPPED.qps })), Layer.orDie)
  const sync = { ours: [] as Array<number>, baseline: [] as Array<number> }
  for (let i = 0; i < 3; i++) {
    for (const kind of ["ours", "baseline"] as const) sync[kind].push((await Effect.runPromise(informerSync(kind).pipe(Effect.provide(syncLayer)))).ms)
  }
  data["informerSync"] = sync
  const syncScenario = `informer sync of ${S.steadyPods} pods (real API server)`
  rows.push(
    // Every run of ours within 3 s, beside the baseline's.
    row(syncScenario, "list (pages of 500, default limit) → synced, median (min–max)", {
      ours: medSpread(sync.ours, ms),
      baseline: medSpread(sync.baseline, ms),
      ratio: ratio(spread(sync.baseline).median, spread(sync.ours).median),
      target: "≤ 3 s",
      met: yesNo(spread(sync.ours).max <= 3000)
    }),
    row(syncScenario, "contender process start → /readyz (all four informers synced)", { ours: ms(dist.readyMs), baseline: ms(baseTs.readyMs) })
  )
  sections.push({
    title: "Memory and informer sync (real API server)",
    body: `${S.steadyPods} pods (the realistic pods above plus a kubelet-like status written through pods/status) on ${STEADY_NODES} Ready Node objects, each attached to ${STEADY_PER_POD} of 10 networks: 10 pools of ${(S.steadyPods * STEADY_PER_POD) / 10} allocations and ${S.steadyPods * STEADY_PER_POD} reservations (built in ${fmt(world.ms / 1000)} s). Each contender is started against it at the default limit; RSS and peak RSS (VmRSS, VmHWM from /proc) after its caches synced (controller: and its start-up sweep ran), then again 10 s later. The image's run is \`${Object.entries(image.env).filter(([k]) => k.startsWith("MALLOC_")).map(([k, v]) => `${k}=${v}`).join(" ")} node ${image.flags.join(" ")} bench/.build/main.js run\`: the bundle the image's build makes (scripts/build.ts) with the environment and node flags of its ENV and ENTRYPOINT, the heap percentage turned into the cap it gives under the deployment's memory limit (${image.heapCap}). The controller gives unused heap back to the OS once its caches synced, after each sweep and after a mass deletion (src/programs/memory.ts); the RSS is read 10 s after the start-up sweep. \`rss-ours-dist-idle\` ran against the same API server just before the steady world was built. Informer sync: the pod informer alone (\`makeInformer\` over KubeApiLive at the shipped client limit) in the benchmark process, three times each, alternating.\n\n${table(
      ["process", "start → ready", "RSS after sync", "RSS 10 s later", "peak RSS", "CPU s"],
      [idle, ...rss].map((r) => [r.label, ms(r.readyMs), mib(r.rssAfterSync), mib(r.rss), mib(r.hwm), fmt(r.cpu)])
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
