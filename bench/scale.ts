/**
 * `npm run bench:scale`: issue 47's scale envelope on a real kube-apiserver + etcd. One world
 * (rssworld.ts `scaleLayout`) grows from scale to scale; at each, the controller runs as the
 * image's program and the benchmark reads its RSS, sync, start-up sweep, an idle minute, single
 * deletions, a node loss, a namespace deletion and the API server's requests. Writes
 * bench/results/scale.json after every scale (a run cut short keeps them) and BENCHMARKS.md.
 *
 *   --pods 10000,50000,150000   the scales, pods (default those three; run in ascending order)
 *   --quick                     a smoke run at 1,500 pods (results not written; raw numbers in bench/.build/scale-quick.json)
 *   --render                    rewrite the results' rows and tables from bench/results/scale.json
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { Effect } from "effect"
import { bundle } from "../scripts/build.ts"
import { adminRequest } from "../test/live/cluster.ts"
import { apiserverRequests, cpuSeconds, planePids, rssOf, runOver } from "./lib/controlplane.ts"
import { type BenchEnv, SHIPPED, startBench } from "./lib/env.ts"
import { imageNodeFlags } from "./lib/image.ts"
import { ROOT } from "./lib/paths.ts"
import { makePhases } from "./lib/phases.ts"
import { type Proc, spawnContender, startupSwept } from "./lib/proc.ts"
import { delta, type Sample, sum } from "./lib/prom.ts"
import { machine, readResults, regenerate, writeResults } from "./lib/report.ts"
import { type WorldLayout, buildWorld, createNodes, scaleLayout, worldFacts } from "./lib/rssworld.ts"
import { API_REQUESTS, type MassRun, massDeletion, singleDeletions } from "./lib/scenarios.ts"
import { fullyFreed } from "./lib/rows.ts"
import { renderScale } from "./lib/scalereport.ts"
import { fmt, mib } from "./lib/stats.ts"
import type { StartedPod } from "./lib/world.ts"

const argv = process.argv.slice(2)
if (argv.includes("--help")) {
  process.stdout.write("npm run bench:scale [-- --pods 10000,50000,150000] [--quick] [--render]   issue 47's scale envelope on a real kube-apiserver + etcd (bench/scale.ts's header)\n")
  process.exit(0)
}
const COMMAND = (pods: string | undefined) => `npm run bench:scale${pods === undefined ? "" : ` -- --pods ${pods}`}`
if (argv.includes("--render")) {
  const r = readResults("scale")
  if (r === undefined) throw new Error("bench/results/scale.json is missing")
  const { rows, sections } = renderScale(r.data["scales"] as ReadonlyArray<ScaleRun>, r.data["limitMi"] as number)
  writeResults({ ...r, rows, sections: [...r.sections.filter((s) => s.title === "Conditions of this run"), ...sections] })
  regenerate(["scale"])
  process.exit(0)
}
const quick = argv.includes("--quick")
const podsArg = argv.includes("--pods") ? argv[argv.indexOf("--pods") + 1] : undefined
const SCALES = (quick ? [1_500] : (podsArg ?? "10000,50000,150000").split(",").map(Number)).sort((a, b) => a - b)
if (SCALES.some((n) => !Number.isInteger(n) || n < 300)) throw new Error(`--pods: whole numbers of at least 300 pods, comma-separated (got ${podsArg})`)
/**
 * Seconds between the reading 10 s past the start-up sweep and the quiet minute: V8's memory reducer
 * runs one more full collection about 100 s after the last one (its watchdog), here the controller's
 * reclaim after the sweep. That collection is the start-up's tail, paid once (and once after each burst),
 * not what a standing controller costs; it re-marks the whole heap, so it grows with the cluster.
 */
const SETTLE_S = 110
const S = quick ? { idleS: 15, settleS: 0, single: 200, nodeLossReps: 1, nsPods: 500 } : { idleS: 60, settleS: SETTLE_S, single: 1_200, nodeLossReps: 3, nsPods: 5_000 }
/** SIG-scalability's steady churn: pods deleted per second while the world stands. */
const SINGLE_RATE = 20
/** Issue 47's node: 30 pods, each with two whereabouts addresses. */
const NODE_PODS = 30
/**
 * How long the namespace deletion's deletecollections may go on: each is cut at the API server's one
 * minute, and a loaded server may need many of them to empty a namespace.
 */
const DELETECOLLECTION_DEADLINE_MS = 30 * 60_000
/** etcd's backend quota: 150k realistic pods and their status revisions outgrow the 2 GiB default before a compaction. */
const ETCD_QUOTA = 8 * 2 ** 30

const { phase, log, finish } = makePhases("bench:scale")
log("bundling the controller as the image's build does (scripts/build.ts) into bench/.build")
const DIST = await bundle(path.join(ROOT, "bench/.build"))
const image = imageNodeFlags()
const { plane, etcd, env, logDir, driver } = await startBench(log, { etcdQuotaBytes: ETCD_QUOTA })
const run = runOver(driver)
const pids = planePids(plane)


/** apiserver_request_total between two scrapes, "VERB resource scope" (code summed). */
const serverByScope = (before: ReadonlyArray<Sample>, after: ReadonlyArray<Sample>) => delta(before, after, "apiserver_request_total", ["verb", "resource", "scope"])

/** The namespace controller's way with a namespace's pods (no kube-controller-manager here): deletecollection (grace 0, no kubelet), again until none is left. */
const deleteCollection = (pods: ReadonlyArray<StartedPod>) =>
  Effect.tryPromise({
    try: async () => {
      const ns = pods[0]!.namespace
      const firstIssued = performance.now()
      for (let attempt = 0; ; attempt++) {
        // The API server ends a request after a minute; a collection cut short is deleted again.
        await adminRequest(plane, "DELETE", `/api/v1/namespaces/${ns}/pods?gracePeriodSeconds=0`, undefined, { timeoutMs: 300_000 }).catch(() => undefined)
        const left = await adminRequest(plane, "GET", `/api/v1/namespaces/${ns}/pods?limit=1`)
        if ((JSON.parse(left.body) as { items?: Array<unknown> }).items?.length === 0) return { firstIssued, lastReturned: performance.now(), attempts: attempt + 1 }
        if (performance.now() - firstIssued > DELETECOLLECTION_DEADLINE_MS) throw new Error(`${ns}: pods left after ${attempt + 1} deletecollections in ${Math.round((performance.now() - firstIssued) / 1000)} s`)
      }
    },
    catch: (e) => (e instanceof Error ? e : new Error(String(e)))
  })

/**
 * The controller's heap (V8, MiB) before and after each collection it ran, from its JSON log's
 * reclaim lines ("returned unused heap memory …", after "caches synced", "sweep", …).
 */
const heapReadings = (log: string): ReadonlyArray<{ readonly after: string; readonly heapBefore: number; readonly heapAfter: number }> =>
  log.split("\n").flatMap((line) => {
    if (!line.includes("returned unused heap memory")) return []
    try {
      const a = (JSON.parse(line) as { annotations?: { after?: string; heapMiB?: string } }).annotations ?? {}
      const m = /^([\d.]+) -> ([\d.]+)$/.exec(a.heapMiB ?? "")
      return m === null ? [] : [{ after: a.after ?? "?", heapBefore: Number(m[1]), heapAfter: Number(m[2]) }]
    } catch {
      return []
    }
  })

/** The controller as the image runs it, started now; its RSS read once a second until `stop`. */
const startSampled = async (label: string, img: ReturnType<typeof imageNodeFlags>) => {
  const t0 = performance.now()
  const p = await spawnContender("ours", { kubeconfig: plane.kubeconfigPath, qps: SHIPPED.qps, burst: SHIPPED.burst, logDir, label, env: { LOG_LEVEL: "info", ...img.env }, nodeArgs: img.flags, script: DIST })
  const trace: Array<readonly [number, number]> = []
  let peak = 0
  const sampler = setInterval(() => {
    try {
      const m = p.memory()
      trace.push([Math.round(performance.now() - t0), m.rss])
      peak = Math.max(peak, m.hwm)
    } catch {
      // exited
    }
  }, 1_000)
  const stop = () => {
    clearInterval(sampler)
    return p.stop()
  }
  return { p, t0, trace, peak: () => peak, stop }
}

/** Start → /readyz → the start-up sweep, 10 s, the settling time, then the quiet minute in which the benchmark sends nothing; `at.stage` says which. */
const startAndIdle = async (p: Proc, t0: number, at: { stage: string }) => {
  await p.ready(900_000)
  const readyMs = performance.now() - t0
  at.stage = "the start-up sweep"
  await startupSwept(p, 900_000, 100)
  const sweptMs = performance.now() - t0
  const sweeps = sum(await p.scrape(), "whereabouts_controller_sweeps_total", { result: "success" })
  log(`  ready after ${fmt(readyMs / 1000)} s, start-up sweep done ${fmt((sweptMs - readyMs) / 1000)} s later (${sweeps} successful); RSS ${mib(p.memory().rss)}, peak ${mib(p.memory().hwm)}`)
  await sleep(10_000)
  const afterSweep = p.memory()
  await sleep(S.settleS * 1_000)
  const m0 = await p.scrape()
  const i0 = await apiserverRequests(plane)
  // The API server's and etcd's own background work shares these CPUs and slows the controller's.
  const cpu = () => ({ controller: cpuSeconds(p.pid), apiserver: cpuSeconds(pids.apiserver), etcd: cpuSeconds(pids.etcd) })
  const cpu0 = cpu()
  await sleep(S.idleS * 1_000)
  const cpu1 = cpu()
  const idleCpuSeconds = cpu1.controller - cpu0.controller
  const planeIdleCpuSeconds = { apiserver: cpu1.apiserver - cpu0.apiserver, etcd: cpu1.etcd - cpu0.etcd }
  const m1 = await p.scrape()
  const i1 = await apiserverRequests(plane)
  const steady = p.memory()
  const planeRss = { apiserver: rssOf(pids.apiserver), etcd: rssOf(pids.etcd) }
  log(`  steady RSS ${mib(steady.rss)} after ${S.idleS} s idle (${fmt((idleCpuSeconds * 1000) / S.idleS)} millicores); kube-apiserver ${mib(planeRss.apiserver)}, etcd ${mib(planeRss.etcd)}`)
  const quiet = { steadyServer: serverByScope(i0, i1), steadyController: delta(m0, m1, API_REQUESTS, ["verb", "resource", "code"]) }
  return { readyMs, sweepMs: sweptMs - readyMs, afterSweep, steady, idleCpuSeconds, planeIdleCpuSeconds, planeRss, quiet }
}

/** With the world standing and the controller `p` running: single deletions, node losses and a namespace deletion, each on pods of its own. */
const scenarios = async (p: Proc, pods: number, index: number) => {
  const standing: BenchEnv = { ...env, start: () => Effect.succeed({ proc: p, scrape: Effect.promise(() => p.scrape()) }) }
  phase(`${pods} pods: single deletions at ${SINGLE_RATE}/s, ${S.single} pods (one address each, 10 pools) added to the standing world`)
  const single = await run(singleDeletions(standing, "ours", { pods: S.single, rate: SINGLE_RATE, limits: SHIPPED, label: `single-${pods}`, keepPools: true, timeoutMs: 180_000 }))
  log(`  delete → pool entry free p50 ${fmt(single.pool.p50)} ms, p99 ${fmt(single.pool.p99)} ms; reservation p99 ${fmt(single.reservation.p99)} ms (${single.completed}/${single.pods})`)

  phase(`${pods} pods: node loss, ${NODE_PODS} pods × 2 addresses on one node force-deleted at once, ×${S.nodeLossReps}`)
  const lostNode = 30_000 + index
  await run(createNodes(plane, lostNode, lostNode + 1))
  const nodeLoss: Array<MassRun> = []
  for (let r = 0; r < S.nodeLossReps; r++) {
    const m = await run(massDeletion(standing, "ours", { pods: NODE_PODS, pools: 2, perPod: 2, limits: SHIPPED, label: `node-${pods}-${r}`, nodeName: `node-${lostNode}`, keepPools: true, timeoutMs: 180_000 }))
    nodeLoss.push(m)
    log(`  #${r + 1}: every address and reservation free ${fmt(fullyFreed(m))} ms after the last delete`)
  }

  phase(`${pods} pods: namespace deletion, ${S.nsPods} pods × 2 addresses over 10 pools, by deletecollection`)
  const namespaceDeletion = await run(massDeletion(standing, "ours", { pods: S.nsPods, pools: 10, perPod: 2, limits: SHIPPED, label: `ns-${pods}`, keepPools: true, deleteWith: deleteCollection, timeoutMs: 300_000 }))
  log(`  deletecollection ${fmt(namespaceDeletion.deleteWindowMs / 1000)} s; every address and reservation free ${fmt(fullyFreed(namespaceDeletion) / 1000)} s after it returned`)
  return { single, nodeLoss, namespaceDeletion }
}

/** One scale: the controller started on the standing world, read through its start, a quiet minute and the scenarios. */
const measure = async (pods: number, layout: WorldLayout, index: number, worldMs: number, img: ReturnType<typeof imageNodeFlags>) => {
  const label = `scale-${pods}${img.limitMi === image.limitMi ? "" : `-limit-${img.limitMi}`}`
  const s0 = await apiserverRequests(plane)
  const c = await startSampled(label, img)
  const { p } = c
  const base = { pods, limitMi: img.limitMi, heapCap: img.heapCap, world: worldFacts(layout), worldMs, label, logFile: p.logFile, rssTrace: c.trace }
  const at = { stage: "start → /readyz" }
  try {
    const { quiet, ...idle } = await startAndIdle(p, c.t0, at)
    at.stage = "the scenarios"
    const ran = await scenarios(p, pods, index)
    const mEnd = await p.scrape()
    const sEnd = await apiserverRequests(plane)
    return {
      ...base,
      heap: heapReadings(fs.readFileSync(p.logFile, "utf8")),
      ...idle,
      end: p.memory(),
      idleSeconds: S.idleS,
      settleSeconds: S.settleS,
      cpuSeconds: cpuSeconds(p.pid),
      ...ran,
      requests: {
        steadyServer: quiet.steadyServer,
        wholeServer: serverByScope(s0, sEnd),
        steadyController: quiet.steadyController,
        wholeController: delta([], mEnd, API_REQUESTS, ["verb", "resource", "code"]),
        informerRestarts: sum(mEnd, "whereabouts_controller_informer_restarts_total"),
        sweeps: sum(mEnd, "whereabouts_controller_sweeps_total")
      }
    }
  } catch (e) {
    // Only a controller that died (its heap cap, the limit) is a finding; the benchmark's own failure
    // beside a running controller (a namespace that would not empty) is not one: the run stops.
    // A dying process's exit comes a moment after its failed scrape.
    if (!(await p.exitsWithin(5_000))) throw e
    const why = e instanceof Error ? e.message : String(e)
    // The log's last lines without a native stack's frames: V8's "heap out of memory" and the like.
    const said = p.tail(60).split("\n").filter((l) => !/^\s*\d+: 0x/.test(l) && l.trim() !== "").slice(-6)
    return { ...base, heap: heapReadings(fs.readFileSync(p.logFile, "utf8")), failed: `during ${at.stage}: ${why.split("\n")[0]}\n${said.join("\n")}`, peak: c.peak() }
  } finally {
    await c.stop()
  }
}

/** A scale's readings (scale.json's `scales`), or how the controller failed there (its heap cap, say). */
export type ScaleRun = Awaited<ReturnType<typeof measure>>

const runs: Array<ScaleRun> = []
const data: Record<string, unknown> = { scales: runs, limitMi: image.limitMi, image: { flags: image.flags, env: image.env }, etcdQuotaBytes: ETCD_QUOTA }
const conditions = (load: string) =>
  `kube-apiserver ${plane.version} and etcd ${etcd} (\`--quota-backend-bytes ${ETCD_QUOTA}\`) on loopback, started by test/live/cluster.ts from \`scripts/envtest-assets.sh\`; no kube-controller-manager, scheduler or kubelets. The API server, etcd, the controller and the benchmark share the machine's ${os.cpus().length} CPUs. ${load}.`
/** After each scale: the results so far, so a run cut short keeps them. */
const publish = () => {
  const { rows, sections } = renderScale(runs, image.limitMi)
  const load = `Load average (1 min) ${fmt(os.loadavg()[0])} when written, after ${runs.map((r) => r.pods).join(", ")} pods`
  writeResults({
    name: "scale",
    command: COMMAND(podsArg),
    date: new Date().toISOString(),
    durationSeconds: performance.now() / 1000,
    machine: machine({ kubeApiserver: plane.version, etcd }),
    rows,
    sections: [{ title: "Conditions of this run", body: `${conditions(load)} Partial: written after each scale.` }, ...sections],
    data
  })
  regenerate(["scale"])
}

let built: WorldLayout | undefined
try {
  for (const [index, pods] of SCALES.entries()) {
    const layout = scaleLayout(pods)
    phase(`world: ${pods} pods over ${layout.nodes} nodes and ${layout.namespaces.length} namespaces (adding ${pods - (built?.pods ?? 0)})`)
    const world = await run(buildWorld(plane, layout, built, (done, ms) => log(`  ${done} pods in ${fmt(ms / 1000)} s`)))
    built = layout
    log(`  built in ${fmt(world.ms / 1000)} s`)
    phase(`${pods} pods: the controller (the image's program) starts, syncs, sweeps, settles ${10 + S.settleS} s, then ${S.idleS} s idle`)
    const r = await measure(pods, layout, index, world.ms, image)
    runs.push(r)
    if (!quick) publish()
    if ("failed" in r) {
      // What it takes, then: the same world, the image's program under twice the limit (and so twice the heap cap).
      const twice = imageNodeFlags(2 * image.limitMi)
      log(`  the controller failed at ${pods} pods under the shipped limit: ${r.failed.split("\n")[0]}; again under a ${twice.limitMi} MiB limit (${twice.heapCap})`)
      phase(`${pods} pods: the controller again, under a ${twice.limitMi} MiB limit`)
      const again = await measure(pods, layout, index + 100, world.ms, twice)
      runs.push(again)
      if (!quick) publish()
      log(`  larger scales left out`)
      break
    }
  }
} finally {
  await plane.stop()
}

const { rows, sections } = renderScale(runs, image.limitMi)
// A smoke run writes no results; its raw numbers stay in the scratch dir for a look.
if (quick) fs.writeFileSync(path.join(ROOT, "bench/.build/scale-quick.json"), `${JSON.stringify({ data, sections }, null, 2)}\n`)
finish({ name: "scale", command: COMMAND(podsArg), quick, machine: machine({ kubeApiserver: plane.version, etcd }), conditions, rows, sections, data })
