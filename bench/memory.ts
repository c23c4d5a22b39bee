/**
 * `npm run bench`: every scenario on the in-memory API server (no external process), the
 * controller against the naive baseline (bench/baseline.ts), plus the heap and address-search
 * measurements in child processes. Writes bench/results/memory.json and the tables in
 * BENCHMARKS.md.
 *
 * BENCH_SCALE=quick runs everything much smaller (a smoke test; results are not written).
 */
import { execFileSync } from "node:child_process"
import * as path from "node:path"
import { Cause, Effect, type Scope } from "effect"
import { KubeApi } from "../src/services/KubeApi.ts"
import * as R from "../src/services/resources.ts"
import { memoryEnv, SHIPPED } from "./lib/env.ts"
import { ROOT } from "./lib/paths.ts"
import { networkStatusFor, realisticPod } from "./lib/pods.ts"
import { type Row, type Section, machine, table, yesNo } from "./lib/results.ts"
import { conflictRows, fmt, isolatedRows, massRows, ms, rateRows, ratio, singleRows, spread, syncRow, writeRows } from "./lib/rows.ts"
import { ALLOCATOR_IN_FLIGHT, type IsolatedRun, type MassRun, type SingleRun, informerSync, isolatedPod, massDeletion, singleDeletions } from "./lib/scenarios.ts"
import { makePhases } from "./lib/phases.ts"

const quick = process.env["BENCH_SCALE"] === "quick"
const S = quick
  ? { massPods: 500, reps: 1, conflictPods: 500, singlePods: 100, heapPods: 2_000, syncPods: 2_000, ratePods: 60, coldReps: 2, lowestReps: 2 }
  : { massPods: 5_000, reps: 3, conflictPods: 5_000, singlePods: 1_000, heapPods: 10_000, syncPods: 10_000, ratePods: 300, coldReps: 5, lowestReps: 9 }
const LATENCY = "1 millis"
const { phase, log, finish } = makePhases("bench")

/** One scenario run in a fresh in-memory world. */
const inWorld = <A>(f: (env: ReturnType<typeof memoryEnv>["env"]) => Effect.Effect<A, Error, KubeApi | Scope.Scope>): Promise<A> => {
  const { env, driver } = memoryEnv(LATENCY)
  return Effect.runPromise(
    Effect.scoped(f(env)).pipe(
      Effect.provideService(KubeApi, driver),
      Effect.catchAllCause((cause) => Effect.die(new Error(Cause.pretty(cause))))
    )
  )
}

const child = (args: ReadonlyArray<string>): Record<string, unknown> =>
  JSON.parse(execFileSync(process.execPath, args as Array<string>, { cwd: ROOT, encoding: "utf8", maxBuffer: 1 << 24 }).trim().split("\n").pop()!) as Record<string, unknown>

const rows: Array<Row> = []
const sections: Array<Section> = []
const data: Record<string, unknown> = {}

// --- mass deletion ---------------------------------------------------------------------------
phase(`mass deletion: ${S.massPods} pods over 10 pools, ${S.reps} repetitions per contender`)
const massOurs: Array<MassRun> = []
const massBase: Array<MassRun> = []
for (let i = 0; i < S.reps; i++) {
  for (const kind of ["ours", "baseline"] as const) {
    const r = await inWorld((env) => massDeletion(env, kind, { pods: S.massPods, pools: 10, limits: SHIPPED, label: `${kind}-${i}` }))
    ;(kind === "ours" ? massOurs : massBase).push(r)
    log(`  ${kind} #${i + 1}: pool free ${fmt(r.poolFreedMs / 1000)} s, reservations free ${fmt(r.reservationsFreedMs / 1000)} s after the last delete`)
  }
}
data["massDeletion"] = { ours: massOurs, baseline: massBase }
const mass = massRows(`mass deletion, ${S.massPods} pods / 10 pools (in memory)`, massOurs, massBase)
// In memory the controller keeps pace with the deletes, so its batches stay small: the writes
// target is the real API server's (npm run bench:apiserver).
rows.push(...mass.rows, ...writeRows(`API writes per freed IP (same runs)`, massOurs, massBase, false))
sections.push({
  title: "Mass deletion (in memory)",
  body: `Every pod deleted at once (16 deletes in flight, grace 0) on the in-memory API server, which adds ${LATENCY} to every call; no client-side rate limit (the real-server runs below use one). Pods were started by the CNI simulation in bulk (\`bulkStart\`: the plugin's own \`assignIP\`, one guarded write per pool, one reservation per IP). Times are from the return of the last delete to the moment the benchmark's own watch saw the last pool entry / reservation of the deleted pods go, and to the contender's \`ips_freed_total\` reaching the count (its Events are written by then). Calls are the contender's \`api_requests_total\` (watches and leader-election leases left out).\n\n${mass.body}`
})

// --- conflicts with an allocator -------------------------------------------------------------
phase(`conflicts: ${S.conflictPods} pods deleted while the CNI simulation starts 10 pods/s in the same pools`)
const confOurs = await inWorld((env) => massDeletion(env, "ours", { pods: S.conflictPods, pools: 10, limits: SHIPPED, label: "conflict-ours", allocatorRate: 10 }))
const confBase = await inWorld((env) => massDeletion(env, "baseline", { pods: S.conflictPods, pools: 10, limits: SHIPPED, label: "conflict-base", allocatorRate: 10 }))
data["conflicts"] = { ours: confOurs, baseline: confBase }
const conf = conflictRows("allocator adds 10 IPs/s to the same pools (in memory)", confOurs, confBase)
rows.push(...conf.rows)
sections.push({
  title: "Conflicts with a concurrent allocator (in memory)",
  body: `The mass deletion above, while the CNI simulation (\`startPod\`: GET pool, guarded JSON patch with retry, reservation, network-status) starts 10 single-interface pods per second (a tick is skipped while ${ALLOCATOR_IN_FLIGHT} starts are still running) round-robin in the same 10 pools until every address of the deleted pods is free. A conflict is a pool patch answered 422 (a failed \`test\` op). At rest the benchmark checks: every live pod's status IPs are held for it in its pool and have their reservation, no entry or reservation belongs to a deleted pod, no IP is listed by two pods.\n\n${conf.body}`
})

// --- single deletions ------------------------------------------------------------------------
phase(`single deletions: ${S.singlePods} pods deleted at 50/s`)
const singleOurs: SingleRun = await inWorld((env) => singleDeletions(env, "ours", { pods: S.singlePods, pools: 10, rate: 50, limits: SHIPPED, label: "single-ours" }))
const singleBase: SingleRun = await inWorld((env) => singleDeletions(env, "baseline", { pods: S.singlePods, pools: 10, rate: 50, limits: SHIPPED, label: "single-base" }))
data["singleDeletions"] = { ours: singleOurs, baseline: singleBase }
const single = singleRows("single deletions at 50/s (in memory, shipped defaults: no client cap)", singleOurs, singleBase, { p50: 50, p99: 500 })
rows.push(...single.rows)
sections.push({
  title: "Single deletions at 50/s (in memory)",
  body: `${S.singlePods} pods over 10 pools, deleted one every 20 ms. Latency per pod: delete issued → the benchmark's watch sees the pod's pool entry (and, second line, its reservation) gone.\n\n${single.body}`
})

// --- one isolated pod -----------------------------------------------------------------------
phase("isolated pod: API calls for one single-interface pod")
const isoOurs: IsolatedRun = await inWorld((env) => isolatedPod(env, "ours", { samples: 3, background: 50, limits: SHIPPED, label: "iso-ours" }))
const isoBase: IsolatedRun = await inWorld((env) => isolatedPod(env, "baseline", { samples: 3, background: 50, limits: SHIPPED, label: "iso-base" }))
data["isolatedPod"] = { ours: isoOurs, baseline: isoBase }
const iso = isolatedRows("one isolated single-interface pod (in memory)", isoOurs, isoBase)
rows.push(...iso.rows)
sections.push({
  title: "One isolated pod (in memory)",
  body: `A pod started by the CNI simulation (\`startPod\`, one interface) among 50 others, deleted alone once the contender has seen it; three samples. Calls counted by the contender's \`api_requests_total\`.\n\n${iso.body}`
})

// --- client rate limit ------------------------------------------------------------------------
phase(`rate limit: ${S.ratePods} pods at QPS 50/burst 25`)
const LIMIT = { qps: 50, burst: 25 }
const rateOurs = await inWorld((env) => massDeletion(env, "ours", { pods: S.ratePods, pools: 10, limits: LIMIT, label: "rate-ours" }))
const rateBase = await inWorld((env) => massDeletion(env, "baseline", { pods: S.ratePods, pools: 10, limits: LIMIT, label: "rate-base" }))
data["rateLimit"] = { ours: rateOurs, baseline: rateBase }
rows.push(...rateRows("client rate limit under mass deletion (in memory, QPS 50/burst 25)", rateOurs, rateBase, "admitted"))
sections.push({
  title: "Client rate limit (in memory)",
  body: `${S.ratePods} pods deleted at once with the client limited to QPS ${LIMIT.qps}/burst ${LIMIT.burst} (the same token bucket as KubeApiLive, \`makeRateLimiter\`). What the contender's limiter let through (every request and watch start, counted as the bucket admits it) sampled every second; a count of completed requests (\`api_requests_total\`) would also hold requests admitted before a window and answered inside it.\n\n${table(
    ["contender", "requests", "last delete → all free", "per-second rates"],
    [rateOurs, rateBase].map((r) => [r.kind, r.rates.total, ms(Math.max(r.poolFreedMs, r.reservationsFreedMs)), r.rates.perSecond.join(" ")])
  )}`
})

// --- the rate limiter alone ------------------------------------------------------------------
phase("rate limiter alone: 3,000 requests at QPS 500/burst 1000, idle and busy event loop")
const limiter: Array<Record<string, unknown>> = []
for (const busy of [0, 1]) for (const impl of ["ours", "effect"]) limiter.push(child([path.join(ROOT, "bench/children/limiter.ts"), impl, "500", "1000", "3000", String(busy)]))
data["limiter"] = limiter
const lim = (impl: string, busy: number) => Number(limiter.find((x) => x["impl"] === impl && x["busyMs"] === busy)?.["rate"])
rows.push({
  scenario: "client rate limiter alone, QPS 500/burst 1000 (3,000 requests, 64 in flight)",
  metric: "requests/s let through after the burst: idle loop / 1 ms of work per request (effect's RateLimiter, used before, in brackets)",
  ours: `${fmt(lim("ours", 0))} / ${fmt(lim("ours", 1))} (${fmt(lim("effect", 0))} / ${fmt(lim("effect", 1))})`,
  baseline: "same limiter",
  ratio: "–",
  target: "≤ 500, and close to it",
  met: yesNo(lim("ours", 0) <= 500 * 1.01 && lim("ours", 1) <= 500 * 1.01)
})
sections.push({
  title: "Client rate limiter alone",
  body: `\`node bench/children/limiter.ts <ours|effect> 500 1000 3000 <busy ms>\`: 3,000 requests through the limiter, 64 at a time, each doing nothing or spinning the CPU for 1 ms (a busy event loop, as during a mass deletion). _ours_ is \`makeRateLimiter\` (a reservation token bucket, as golang.org/x/time/rate); _effect_ is effect's \`RateLimiter\` token bucket with the same parameters, which \`makeRateLimiter\` wrapped before this benchmark: it refills one token per timer, so late timers lower the rate.\n\n${table(
    ["limiter", "work per request", "seconds", "ideal", "requests/s after the burst"],
    limiter.map((x) => [String(x["impl"]), `${String(x["busyMs"])} ms`, fmt(Number(x["seconds"])), fmt(Number(x["ideal"])), fmt(Number(x["rate"]))])
  )}`
})

// --- heap per cached pod ----------------------------------------------------------------------
phase(`heap per cached pod: ${S.heapPods} realistic pods, child processes with --expose-gc`)
const heap = { projection: [] as Array<Record<string, unknown>>, full: [] as Array<Record<string, unknown>> }
for (let i = 0; i < 3; i++) {
  for (const mode of ["projection", "full"] as const) heap[mode].push(child(["--expose-gc", path.join(ROOT, "bench/children/heap.ts"), mode, String(S.heapPods)]))
}
data["heap"] = heap
const perPod = (m: "projection" | "full") => spread(heap[m].map((h) => Number(h["perPod"])))
rows.push({
  scenario: `heap per cached pod (${S.heapPods} realistic pods with Multus annotations)`,
  metric: "heap delta of the synced informer cache ÷ pods, median (min–max)",
  ours: `${fmt(perPod("projection").median)} B (${fmt(perPod("projection").min)}–${fmt(perPod("projection").max)})`,
  baseline: `${fmt(perPod("full").median)} B (${fmt(perPod("full").min)}–${fmt(perPod("full").max)})`,
  ratio: ratio(perPod("full").median, perPod("projection").median),
  target: "≤ 1.5 KB (baseline ~16 KB)",
  met: yesNo(perPod("projection").max <= 1536)
})
sections.push({
  title: "Heap per cached pod",
  body: `\`node --expose-gc bench/children/heap.ts <projection|full> ${S.heapPods}\`, one process per measurement, three each: the real informer (\`makeInformer\`) lists the pods from a stub API that decodes each pod from its JSON text (${fmt(Number(heap.full[0]?.["jsonBytes"]))} bytes: managedFields of four managers, labels, an ownerReference, two containers with probes and env, projected volumes, tolerations, status with five conditions and two container statuses, the Multus \`networks\` and \`network-status\` annotations). Heap used after four full GCs with the cache synced, minus the same before the informer started, divided by the pods cached. The projection is \`projectPod\` exactly as \`Caches\` uses it; the baseline keeps the decoded object.\n\n${table(
    ["cache", "run", "pods", "heap before", "heap after", "per pod", "list+sync time"],
    (["projection", "full"] as const).flatMap((m) => heap[m].map((h, i) => [m, i + 1, String(h["cached"]), `${fmt(Number(h["before"]) / 2 ** 20)} MiB`, `${fmt(Number(h["after"]) / 2 ** 20)} MiB`, `${fmt(Number(h["perPod"]))} B`, ms(Number(h["syncMs"]))]))
  )}`
})

// --- informer sync ----------------------------------------------------------------------------
phase(`informer sync: ${S.syncPods} pods`)
const sync = await (async () => {
  const { driver, state } = memoryEnv(LATENCY)
  for (let i = 0; i < S.syncPods; i++) {
    const nets = [{ network: "shop/net-0", ifname: "net1", ips: [`10.0.${(i >> 8) & 255}.${i & 255}`] }]
    state.create(R.Pods, "shop", realisticPod("shop", `web-${i}`, i, { networks: "shop/net-0@net1", networkStatus: networkStatusFor(i, nets) }))
  }
  const out = { ours: [] as Array<number>, baseline: [] as Array<number> }
  for (let i = 0; i < 3; i++) {
    for (const kind of ["ours", "baseline"] as const) out[kind].push((await Effect.runPromise(informerSync(kind).pipe(Effect.provideService(KubeApi, driver)))).ms)
  }
  return out
})()
data["informerSync"] = sync
rows.push(syncRow(`informer sync of ${S.syncPods} pods (in memory)`, "list (pages of 500) → synced, median (min–max)", sync))
sections.push({
  title: "Informer sync (in memory)",
  body: `The pod informer (\`makeInformer\`, pages of 500) over the in-memory API server holding ${S.syncPods} realistic pods, until synced; three runs each, alternating. The in-memory server deep-copies every object it lists, which both contenders pay.\n\n${table(["cache", "runs (ms)"], [["projection (ours)", sync.ours.map((x) => fmt(x)).join(", ")], ["full objects (baseline)", sync.baseline.map((x) => fmt(x)).join(", ")]])}`
})

// --- lowest free address ----------------------------------------------------------------------
phase("lowest free address: /16 with 10k allocations (three shapes), /64 with 100k")
const lowest: Record<string, Array<Record<string, unknown>>> = {}
const lowestChild = (args: ReadonlyArray<string>) => Array.from({ length: S.lowestReps }, () => child(args))
for (const c of ["v4-16-10k", "v6-64-100k"]) {
  for (const impl of ["ours", "core", "baseline"]) lowest[`${c} ${impl}`] = lowestChild([path.join(ROOT, "bench/children/lowest-free.ts"), c, impl])
}
// The other shapes of a /16 with 10k: after churn (every fourth address free again) and sparse.
for (const c of ["v4-16-10k-holes", "v4-16-10k-sparse"]) {
  for (const impl of ["ours", "baseline"]) lowest[`${c} ${impl}`] = lowestChild([path.join(ROOT, "bench/children/lowest-free.ts"), c, impl])
}
data["lowestFree"] = lowest
// Where the cold time goes: each step of the searches on its first run, one process per step.
const floorSteps = ["values", "walk", "scan", "probe", "keys", "offsets", "bitmap"] as const
const floor: Record<string, Record<string, Array<Record<string, unknown>>>> = {}
for (const [n, shape] of [[10_000, "dense"], [10_000, "sparse"], [100_000, "dense"]] as const) {
  const bySteps: Record<string, Array<Record<string, unknown>>> = {}
  for (const st of floorSteps) bySteps[st] = Array.from({ length: 3 }, () => child([path.join(ROOT, "bench/children/lowest-free-phases.ts"), String(n), shape, st]))
  floor[`${n} ${shape}`] = bySteps
}
data["lowestFreeFloor"] = floor
const lf = (c: string, impl: string, key: "coldMs" | "coldGcMs" | "warmMinMs" | "warmMedianMs") => spread((lowest[`${c} ${impl}`] ?? []).map((x) => Number(x[key])))
for (const [c, label, target] of [
  ["v4-16-10k", "/16 with 10k allocations", 1],
  ["v4-16-10k-holes", "/16 with 10k allocations, every fourth address free again", 1],
  ["v4-16-10k-sparse", "/16 with 10k allocations, every sixth address taken", 1],
  ["v6-64-100k", "/64 with 100k allocations", 10]
] as const) {
  rows.push({
    scenario: `lowest free IP, ${label} (in memory)`,
    metric: "first call in a fresh process (JIT cold), median of runs",
    ours: ms(lf(c, "ours", "coldMs").median),
    baseline: ms(lf(c, "baseline", "coldMs").median),
    ratio: ratio(lf(c, "baseline", "coldMs").median, lf(c, "ours", "coldMs").median),
    target: `≤ ${target} ms`,
    met: yesNo(lf(c, "ours", "coldMs").median <= target)
  })
  rows.push({
    scenario: `lowest free IP, ${label} (in memory)`,
    metric: "later calls (no state kept between calls), best / median",
    ours: `${ms(lf(c, "ours", "warmMinMs").min)} / ${ms(lf(c, "ours", "warmMedianMs").median)}`,
    baseline: `${ms(lf(c, "baseline", "warmMinMs").min)} / ${ms(lf(c, "baseline", "warmMedianMs").median)}`,
    ratio: ratio(lf(c, "baseline", "warmMedianMs").median, lf(c, "ours", "warmMedianMs").median),
    target: `≤ ${target} ms`,
    met: yesNo(lf(c, "ours", "warmMedianMs").median <= target)
  })
}
sections.push({
  title: "Lowest free address",
  body: `\`node bench/children/lowest-free.ts <case> <impl>\`, ${S.lowestReps} fresh processes each. The pool is decoded from JSON as the plugin reads it, in three shapes: dense from its first address (_v4-16-10k_, _v6-64-100k_: what lowest-first allocation makes, and the anchors' worst case: the answer lies past every allocation), every fourth address free again (_-holes_: a pool after churn) and every sixth address taken (_-sparse_: V8 keeps such an object's integer keys in a hash table, "dictionary elements"). _ours_ is \`assignIP\`: one walk asks the pool for offset 1, 2, … (a numeric element lookup, no key string), checks each entry it meets against the request and notes the first free offset; it settles both questions once it has met every entry, and gives up when the holes it passed outnumber half the entries it met (plus 16); then the idempotency scan over the values and a second search (asking for offset 1, 2, … until one is missing) decide. It returns the new entry, the caller adds it. _core_ is \`lowestFreeOffset\`, the bitmap search over every key's offset (what \`assignIP\` falls back to when an offset could pass 2^53), without the idempotency check; _baseline_ is the anchors' search (every candidate formatted as text and looked up in a set of reserved IP strings). "cold" is the first call in the process (includes JIT compilation); "GC in cold" is the garbage-collection time (PerformanceObserver) that fell inside it; "best / median" are over up to 30 later calls (at most ~3 s of them). The cold call runs right after the pool is decoded, as in the plugin, which decodes the pool it has just read: its entries are still in the CPU's caches. Disturbing that costs more than the garbage of decoding it: ours run after two full GCs (\`node --expose-gc bench/children/lowest-free.ts v4-16-10k ours settled\`, measured by hand at commit 1538e35, not part of the run) is slower, not faster: 7 processes each, 0.77–0.86 ms plain; after the GCs 0.86–0.96 ms in 5 of 7 (4.1 and 4.8 ms in the other two); 1.20–1.35 ms when the process also idles 200 ms before the call (\`… settled 200\`).\n\n${table(
    ["case", "impl", "cold (median of runs)", "cold (min–max)", "GC in cold (median)", "later: best", "later: median"],
    Object.keys(lowest).map((k) => {
      const [c, impl] = k.split(" ") as [string, string]
      const cold = lf(c, impl, "coldMs")
      return [c, impl, ms(cold.median), `${ms(cold.min)}–${ms(cold.max)}`, ms(lf(c, impl, "coldGcMs").median), ms(lf(c, impl, "warmMinMs").min), ms(lf(c, impl, "warmMedianMs").median)]
    })
  )}\n\nWhere the cold time goes: \`node bench/children/lowest-free-phases.ts <allocations> <dense|sparse> <step>\` times one step of the searches on its first run, one fresh process per step (3 each, median), so no step runs on code another step warmed up; a step's inputs are made first, untimed. _ours_ in a dense pool is Object.values (for the count) and the walk; in a sparse pool the walk gives up after a few offsets and the scan and the probe follow. _over every key_ (what \`assignIP\` did before it probed, and still does when an offset could pass 2^53): Object.values and the scan, then \`Object.keys\` (a string per key), key → number and the bitmap search. What the steps leave out of a whole cold \`assignIP\` is mostly compiling it: V8 parses and compiles a function on its first call (\`--log-function-events\`: assignIP and the helpers the walk needs, ~0.25 ms).\n\n${table(
    ["allocations", "Object.values", "walk", "scan", "probe", "total (ours)", "Object.keys", "key → number", "bitmap", "total (over every key)"],
    Object.entries(floor).map(([label, bySteps]) => {
      const med = (st: string) => spread((bySteps[st] ?? []).map((r) => Number(r["ms"]))).median
      const settled = (bySteps["walk"] ?? []).every((r) => (r["out"] as { settled?: boolean } | undefined)?.settled === true)
      const ours = med("values") + med("walk") + (settled ? 0 : med("scan") + med("probe"))
      const everyKey = med("values") + med("scan") + med("keys") + med("offsets") + med("bitmap")
      return [label, ms(med("values")), `${ms(med("walk"))}${settled ? " (settles)" : " (gives up)"}`, ms(med("scan")), ms(med("probe")), ms(ours), ms(med("keys")), ms(med("offsets")), ms(med("bitmap")), ms(everyKey)]
    })
  )}`
})

// --- what loading costs ---------------------------------------------------------------------
phase("import cost: RSS and heap of loading each library, fresh processes")
const importCases: ReadonlyArray<readonly [string, string, boolean]> = [
  ["effect", "effect", false],
  ["undici", "undici", false],
  ["prom-client", "prom-client", false],
  ["@kubernetes/client-node (the package)", "@kubernetes/client-node", false],
  ["client-node's KubeConfig (dist/config.js)", "@kubernetes/client-node/dist/config.js", false],
  ["the same through the entry point's hook", "@kubernetes/client-node/dist/config.js", true],
  ["the controller's modules (KubeApiLive, layers, run, audit, release), with the hook", "./src/services/KubeApiLive.ts,./src/programs/layers.ts,./src/programs/run.ts,./src/programs/audit.ts,./src/programs/release.ts", true]
]
const importCost = importCases.map(([label, modules, slim]) => ({
  label,
  runs: Array.from({ length: 3 }, () => child(["--expose-gc", path.join(ROOT, "bench/children/import-cost.ts"), modules, ...(slim ? ["slim"] : [])]))
}))
data["importCost"] = importCost
const deltaOf = (runs: ReadonlyArray<Record<string, unknown>>, what: "rss" | "heap") =>
  spread(runs.map((r) => (Number(r[what === "rss" ? "rssAfter" : "heapAfter"]) - Number(r[what === "rss" ? "rssBefore" : "heapBefore"])) / 2 ** 20)).median
sections.push({
  title: "What loading costs",
  body: `\`node --expose-gc bench/children/import-cost.ts <modules> [slim]\`, three fresh processes each: RSS and V8 heap used after two full GCs, before and after the import (the process already holds Node and its TypeScript stripper: ${fmt(spread(importCost[0]!.runs.map((r) => Number(r["rssBefore"]) / 2 ** 20)).median)} MiB RSS). Libraries share dependencies (client-node loads undici), so the rows do not add up. The fixed cost of the deployed process, idle, is in the real-API-server section.\n\n${table(
    ["what is imported", "RSS added (median)", "heap added (median)"],
    importCost.map((c) => [c.label, `${fmt(deltaOf(c.runs, "rss"))} MiB`, `${fmt(deltaOf(c.runs, "heap"))} MiB`])
  )}`
})

// --- write ------------------------------------------------------------------------------------
finish({
  name: "memory",
  command: "npm run bench",
  quick,
  machine: machine(),
  conditions: (load) => `${load}: the machine is shared, so absolute times move between runs; the ratios between contenders measured in the same run move less.`,
  rows,
  sections,
  data
})
