/**
 * `npm run soak -- --minutes 60 --seed N`: seeded churn on a real kube-apiserver + etcd with the
 * upstream whereabouts plugin allocating, two controller replicas behind a chaos proxy, a fault
 * every --fault-every seconds and an invariant checker throughout and at rest. Writes the report,
 * plot, events.jsonl and logs to the output directory; exits 1 on any violation.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { Effect, ManagedRuntime } from "effect"
import { bundle } from "../../scripts/build.ts"
import { scriptAsset } from "../../test/live/cluster.ts"
import { credentialsOf } from "../../test/live/support/rest.ts"
import { etcdEndpoint } from "../../test/live/support/etcd.ts"
import { type BenchPlane, cpuSeconds, driverLayer, planePids, startBenchPlane } from "../lib/controlplane.ts"
import { imageNodeFlags } from "../lib/image.ts"
import { ROOT } from "../lib/paths.ts"
import { checkAtRest, evaluateContinuously, recordViolation, startChecker } from "./checker.ts"
import { planFaults } from "./fault-plan.ts"
import { makeFaults } from "./faults.ts"
import { makeHistory } from "./history.ts"
import { overlapping } from "./invariants.ts"
import { makeKubelet } from "./kubelet.ts"
import { USAGE, massEveryMs, parseOptions, type SoakOptions } from "./options.ts"
import { makePlan, planSummary } from "./plan.ts"
import { startProxy } from "./proxy.ts"
import { IDENTITIES, startReplicas } from "./replicas.ts"
import { workloadFacts, writeReport } from "./report.ts"
import { makeWorkload, type Workload } from "./workload.ts"
import { controllerKubeconfig, createNetworks, makeNodes } from "./world.ts"

const log = (line: string) => process.stderr.write(`[soak] ${line}\n`)
const SAMPLE_EVERY_MS = 5_000

export type Env = Awaited<ReturnType<typeof setUp>>

/** Everything but the workload: API server, networks, nodes, proxy, checker, two replicas (one leading). */
const setUp = async (o: SoakOptions) => {
  fs.rmSync(o.out, { recursive: true, force: true })
  fs.mkdirSync(path.join(o.out, "logs"), { recursive: true })
  log(`output in ${o.out}`)
  const script = await bundle(path.join(o.out, "dist"))
  const image = imageNodeFlags()
  const plugin = await scriptAsset("whereabouts-plugin.sh", true)
  log(`the image's program ${path.relative(ROOT, script)} with ${image.flags.join(" ")} and ${Object.entries(image.env).map(([k, v]) => `${k}=${v}`).join(" ")}; plugin ${plugin}`)
  const plane = await startBenchPlane()
  log(`kube-apiserver ${plane.version} at ${plane.server}`)
  const admin = credentialsOf(plane.kubeconfigPath)
  const runtime = ManagedRuntime.make(driverLayer(plane))
  const history = makeHistory(path.join(o.out, "events.jsonl"), Date.now())
  const nodes = makeNodes(admin, history)
  const plan = makePlan({
    seed: o.seed,
    durationMs: o.minutes * 60_000,
    rate: o.rate,
    meanLifetimeMs: o.lifetimeSeconds * 1000,
    delShare: o.delShare,
    massEveryMs: massEveryMs(o),
    nodeDeathEveryMs: Math.max(60_000, Math.min(240_000, o.minutes * 60_000 / 4)),
    nadEveryMs: Math.max(45_000, Math.min(150_000, o.minutes * 60_000 / 6))
  })
  await runtime.runPromise(Effect.zipRight(createNetworks, Effect.forEach(plan.initialNodes, nodes.join, { discard: true })))
  const proxy = await startProxy(plane.server, path.join(plane.dir, "certs"))
  const kubeconfig = await runtime.runPromise(controllerKubeconfig(admin, proxy.url, o.out, o.minutes / 60 + 2))
  const ref: { workload: Workload | undefined } = { workload: undefined }
  const replicas = startReplicas({ kubeconfig, script, nodeArgs: image.flags, env: image.env, logDir: path.join(o.out, "logs"), history })
  const faults = makeFaults({ seed: o.seed, history, proxy, replicas, plane, etcd: etcdEndpoint(plane.kubeconfigPath) })
  const checker = startChecker({
    creds: admin,
    history,
    boundMs: o.boundSeconds * 1000,
    windows: () => faults.windows(),
    known: (pod) => (ref.workload?.byUid.get(pod.uid)?.ref === pod.ref ? ref.workload.byUid.get(pod.uid)!.attached : undefined),
    delStarted: (uid) => ref.workload?.delStarted.has(uid) === true,
    deletedAt: (uid) => ref.workload?.byUid.get(uid)?.deletedAt,
    grep: (text) => replicas.grep(text)
  })
  await Promise.all(checker.watchers.map((w) => w.synced))
  for (const id of IDENTITIES) await replicas.start(id)
  const kubelet = makeKubelet({ creds: admin, history, plugin, adminKubeconfig: plane.kubeconfigPath, pluginSlots: Effect.runSync(Effect.makeSemaphore(o.pluginSlots)) })
  const leader = await replicas.awaitLeader(120_000, () => replicas.grep("sweep finished").length > 0)
  if (leader === undefined) throw new Error(`no replica led and swept within 120 s:\n${replicas.process(IDENTITIES[0])?.tail(20) ?? ""}`)
  log(`${leader} leads; its start-up sweep has finished`)
  return { o, plan, plane, runtime, history, proxy, replicas, checker, kubelet, nodes, faults, ref }
}

/** Every 5 s: RSS and metrics of both replicas; a replica that exited without the harness is a violation, and is restarted. */
const sampleLoop = async (env: Env, stopped: () => boolean) => {
  while (!stopped()) {
    await env.replicas.sample().catch(() => undefined)
    for (const g of env.replicas.generations()) {
      if (g.exit === undefined || g.endedBy !== undefined || env.checker.reported.has(`exit ${g.pid}`)) continue
      recordViolation(env.checker, { kind: "controller exited", id: `exit ${g.pid}`, summary: `${g.identity} process ${g.n} exited on its own (${g.exit.signal ?? `code ${g.exit.code}`})`, keys: [`replica ${g.identity}`] })
      if (!env.replicas.running(g.identity)) await env.replicas.start(g.identity)
    }
    await sleep(SAMPLE_EVERY_MS)
  }
}

const progressLoop = async (env: Env, workload: Workload, t0: number, stopped: () => boolean) => {
  while (!stopped()) {
    await sleep(30_000)
    const w = workloadFacts(workload, t0)
    const frees = env.checker.obligations.samples()
    const rss = IDENTITIES.map((id) => {
      const last = env.replicas.samples().filter((s) => s.identity === id).at(-1)
      return `${id} ${last === undefined ? "–" : (last.rssBytes / 2 ** 20).toFixed(0)} MiB`
    })
    log(
      `${((Date.now() - t0) / 60_000).toFixed(1)} min: ${w.runningAtEnd} pods running, ${w.created} created, ${w.gone} gone; ${frees.length} frees seen; ${env.faults.records().length} faults; ${env.checker.violations.length} violations; RSS ${rss.join(", ")}; load ${os.loadavg()[0]!.toFixed(1)}`
    )
  }
}

/** The run: workload and faults from t0, the checker throughout, then rest and the check at rest. */
const run = async (env: Env) => {
  const { o, plan } = env
  const t0 = Date.now()
  env.history.t0 = t0
  const durationMs = o.minutes * 60_000
  log(`plan: ${JSON.stringify(planSummary(plan))}`)
  const faultPlan = planFaults(o.seed, durationMs, o.faultEverySeconds * 1000, o.faults)
  const workload = makeWorkload({ plan, t0, endAt: t0 + durationMs, kubelet: env.kubelet, nodes: env.nodes, history: env.history })
  env.ref.workload = workload
  let stopped = false
  const loops = [evaluateContinuously(env.checker, () => stopped), sampleLoop(env, () => stopped), progressLoop(env, workload, t0, () => stopped)]
  const cpu0 = cpuOf(env.plane)
  await Promise.all([env.runtime.runPromise(workload.run), env.runtime.runPromise(env.faults.run(faultPlan, t0, t0 + durationMs))])
  const restMs = o.boundSeconds * 1000 + 15_000
  log(`workload and faults done at ${((Date.now() - t0) / 60_000).toFixed(1)} min; resting ${restMs / 1000} s before the check at rest`)
  await sleep(restMs)
  stopped = true
  await Promise.all(loops)
  const atRest = await checkAtRest(env.checker)
  await checkControllerGauges(env)
  for (const [what, list] of [["deletion loops", env.replicas.intervals().actings], ["leaderships", env.replicas.intervals().leaderships]] as const) {
    for (const [a, b] of overlapping(list)) {
      recordViolation(env.checker, { kind: "two leaders", id: `overlap ${what} ${a.who} ${a.from} ${b.who} ${b.from}`, summary: `${what} of ${a.who} and ${b.who} overlapped for ${((Math.min(a.to, b.to) - b.from) / 1000).toFixed(1)} s`, keys: ["leadership"] })
    }
  }
  for (const at of env.replicas.bothLeading()) {
    recordViolation(env.checker, { kind: "two leaders", id: `gauges ${at}`, summary: `both replicas' whereabouts_controller_leader read 1 in one scrape round at ${((at - t0) / 1000).toFixed(1)} s`, keys: ["leadership"] })
  }
  const cpu1 = cpuOf(env.plane)
  for (const id of IDENTITIES) {
    const exit = await env.replicas.signal(id, "end of run")
    if (exit !== undefined && exit.code !== 0) recordViolation(env.checker, { kind: "unclean shutdown", id: `shutdown ${id}`, summary: `${id} exited with ${exit.signal ?? `code ${exit.code}`} after SIGTERM at the end of the run`, keys: [`replica ${id}`] })
  }
  return { t0, durationMs, plan, faultPlan, workload, atRest, cpu: { apiserver: cpu1.apiserver - cpu0.apiserver, etcd: cpu1.etcd - cpu0.etcd, wallSeconds: (Date.now() - t0) / 1000 } }
}

/**
 * The controller judged the same run with its own invariant monitor (src/domain/invariants.ts):
 * at the end its leader's gauge must read 0 for every kind, as the checker's independent reading
 * does. A leader without the gauge never ran its monitor.
 */
const checkControllerGauges = async (env: Env) => {
  for (const r of await env.replicas.invariantGauges()) {
    if (!r.leader) continue
    const keys = [`replica ${r.identity}`]
    if (Object.keys(r.kinds).length === 0) {
      recordViolation(env.checker, { kind: "invariant monitor", id: `gauge absent ${r.identity}`, summary: `${r.identity} leads but exports no whereabouts_controller_invariant_violations`, keys })
    }
    for (const [kind, n] of Object.entries(r.kinds)) {
      if (n > 0) recordViolation(env.checker, { kind: "invariant monitor", id: `gauge ${r.identity} ${kind}`, summary: `${r.identity}'s own invariant monitor reports ${n} ${kind} violation(s) at the end of the run`, keys })
    }
  }
}

const cpuOf = (plane: BenchPlane) => {
  const pids = planePids(plane)
  return { apiserver: cpuSeconds(pids.apiserver), etcd: cpuSeconds(pids.etcd) }
}

export type RunResult = Awaited<ReturnType<typeof run>>

const teardown = async (env: Env | undefined) => {
  if (env === undefined) return
  for (const id of IDENTITIES) await env.replicas.signal(id, "end of run").catch(() => undefined)
  env.checker.stop()
  await env.proxy.close().catch(() => undefined)
  await env.runtime.dispose().catch(() => undefined)
  await env.plane.stop()
  env.kubelet.cleanup()
  env.history.close()
}

const main = async (): Promise<number> => {
  let o: SoakOptions | "help"
  try {
    o = parseOptions(process.argv.slice(2))
  } catch (e) {
    process.stderr.write(`soak: ${e instanceof Error ? e.message : String(e)}\n${USAGE}\n`)
    return 2
  }
  if (o === "help") {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
  let env: Env | undefined
  try {
    env = await setUp(o)
    const result = await run(env)
    const violations = env.checker.violations.length
    const written = writeReport(env, result)
    log(`${violations} violation${violations === 1 ? "" : "s"}; report ${path.relative(process.cwd(), written)}`)
    return violations === 0 ? 0 : 1
  } finally {
    await teardown(env)
  }
}

// Exit explicitly: keep-alive sockets and timers of the harness must not hold the process.
process.exit(await main())
