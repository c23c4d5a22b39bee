/**
 * The controller's own CPU per API request and per watch event on a real API server, against
 * undici used directly: what the client stack (KubeApiLive, and for requests ApiFlow and the
 * metrics over it) adds. The API server's CPU is not counted (another process); each figure is
 * this process's CPU time (user + system) over the requests or events, less what it spends
 * waiting (measured first, per second), divided by their number.
 *
 *   node --expose-gc bench/client-cost.ts requests [checkout…]
 *        GETs of pods that do not exist (the re-check's 404s), 16 in flight (CLIENT_COST_N, 4,000),
 *        after a warm-up round
 *   node --expose-gc bench/client-cost.ts watch [checkout…]
 *        DELETED events of realistic pods (CLIENT_COST_N, 1,500), deleted by kubectl in another
 *        process
 *   node --expose-gc bench/client-cost.ts list
 *        the re-check's LIST of a namespace of realistic pods (CLIENT_COST_N, 5,000; pages of 500,
 *        5 lists per figure): metadata only against names only (a Table), per pod listed, this
 *        process's CPU and kube-apiserver's (from /proc, 10 ms ticks)
 *
 * The contenders: each checkout's client stack (this one's when none is given; another checkout
 * needs `node_modules`, e.g. a symlink to this one's) and undici alone, CLIENT_COST_ROUNDS rounds
 * (3) alternating, each figure's median printed last. Evidence for BENCHMARKS.md (Decisions); not
 * a benchmark command.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { Duration, Effect, Layer, Stream } from "effect"
import { Agent, fetch, request } from "undici"
import { projectPod } from "../src/domain/pod.ts"
import { KubeApi, type ReadOptions } from "../src/services/KubeApi.ts"
import * as R from "../src/services/resources.ts"
import { type BenchPlane, cpuSeconds, planePids, startBenchPlane } from "./lib/controlplane.ts"
import { networkStatusFor, realisticPod } from "./lib/pods.ts"
import { spread } from "./lib/stats.ts"

const mode = process.argv[2]
if (mode !== "requests" && mode !== "watch" && mode !== "list") throw new Error("usage: node bench/client-cost.ts <requests|watch|list> [checkout…]")
const N = Number(process.env["CLIENT_COST_N"] ?? { requests: 4_000, watch: 1_500, list: 5_000 }[mode])
const ROUNDS = Number(process.env["CLIENT_COST_ROUNDS"] ?? 3)
const checkouts = process.argv.slice(3).map((c) => path.resolve(c))
if (checkouts.length === 0) checkouts.push(path.resolve(import.meta.dirname, ".."))

/** A checkout's KubeApi as its programs stack it (flow control, metrics, the live layer). */
const stackOf = async (checkout: string) => {
  const load = (file: string) => import(path.join(checkout, "src", file))
  const [{ programKubeApi }, { layerWith }, { layerLive }, Metrics] = await Promise.all([load("programs/layers.ts"), load("services/ControllerConfig.ts"), load("services/KubeApiLive.ts"), load("services/Metrics.ts")])
  return (plane: BenchPlane): Layer.Layer<KubeApi> =>
    programKubeApi(layerLive).pipe(Layer.provide(Layer.merge(layerWith({ kubeconfig: plane.kubeconfigPath, apiQps: 0, requestTimeout: Duration.seconds(60) }), Metrics.layer)), Layer.orDie)
}
const stacks = await Promise.all(checkouts.map(async (c) => ({ name: `ours (${path.basename(c)})`, stack: await stackOf(c) })))
const collect = () => (globalThis as { gc?: () => void }).gc?.()

/** This process's CPU milliseconds per second while it waits: timers, the control plane's log pipes. */
let background = 0
const measureBackground = async () => {
  collect()
  const from = process.cpuUsage()
  await new Promise((resolve) => setTimeout(resolve, 3_000))
  const used = process.cpuUsage(from)
  background = (used.user + used.system) / 1000 / 3
}

/** This process's CPU milliseconds spent in `run`, less the background over its wall time, per item. */
const cpuPer = async (items: number, run: (started: () => void) => Promise<void>): Promise<number> => {
  collect()
  let from = process.cpuUsage()
  let at = performance.now()
  await run(() => {
    from = process.cpuUsage()
    at = performance.now()
  })
  const used = process.cpuUsage(from)
  return ((used.user + used.system) / 1000 - (background * (performance.now() - at)) / 1000) / items
}

const driver = (plane: BenchPlane) => stacks[0]!.stack(plane)
const rawAgent = (plane: BenchPlane) => new Agent({ connect: { ca: plane.caPem }, allowH2: false })

const requestsRound = async (plane: BenchPlane): Promise<Record<string, number>> => {
  const viaOurs = (layer: Layer.Layer<KubeApi>) => () =>
    Effect.runPromise(
      Effect.flatMap(KubeApi, (api) => Effect.forEach(Array.from({ length: N }, (_, i) => i), (i) => Effect.either(api.get(R.Pods, "default", `absent-${i}`)), { concurrency: 16, discard: true })).pipe(
        Effect.provide(layer)
      )
    )
  const agent = rawAgent(plane)
  const viaUndici = async () => {
    let next = 0
    const lane = async () => {
      while (next < N) {
        const r = await request(`${plane.server}/api/v1/namespaces/default/pods/absent-${next++}`, { dispatcher: agent, headers: { Authorization: `Bearer ${plane.token}`, Accept: "application/json" } })
        await r.body.text()
      }
    }
    await Promise.all(Array.from({ length: 16 }, lane))
  }
  const out: Record<string, number> = {}
  for (const [name, run] of [...stacks.map((s) => [s.name, viaOurs(s.stack(plane))] as const), ["undici alone", viaUndici] as const]) {
    await run() // warm-up: connections, JIT
    out[name] = await cpuPer(N, run)
  }
  await agent.close()
  return out
}

/** N realistic pods in a new namespace. */
const createPods = (plane: BenchPlane, ns: string) =>
  Effect.runPromise(
    Effect.flatMap(KubeApi, (api) =>
      Effect.zipRight(
        api.create(R.Namespaces, undefined, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } }),
        Effect.forEach(
          Array.from({ length: N }, (_, i) => i),
          (i) => api.create(R.Pods, ns, realisticPod(ns, `p-${i}`, i, { networks: `${ns}/net@net1`, networkStatus: networkStatusFor(i, [{ network: `${ns}/net`, ifname: "net1", ips: [`10.1.${i >> 8}.${i & 255}`] }]) }, { forCreate: true })),
          { concurrency: 16, discard: true }
        )
      )
    ).pipe(Effect.provide(driver(plane)))
  )

/** Creates N realistic pods in `ns`, then counts `consume`'s CPU while kubectl deletes them. */
const deletedEvents = async (plane: BenchPlane, ns: string, consume: (begin: () => void) => Promise<void>): Promise<number> => {
  await createPods(plane, ns)
  const kubectl = path.join(process.env["KUBEBUILDER_ASSETS"] ?? "", "kubectl")
  return cpuPer(N, (started) =>
    consume(() => {
      started()
      spawn(kubectl, ["--kubeconfig", plane.kubeconfigPath, "delete", "pods", "--all", "-n", ns, "--grace-period=0", "--force", "--wait=false"], { stdio: "ignore" })
    })
  )
}

const watchRound = async (plane: BenchPlane, round: number): Promise<Record<string, number>> => {
  const out: Record<string, number> = {}
  for (const [k, { name, stack }] of stacks.entries()) {
    // Watching from the list's version: only the pods' DELETED events come, once kubectl runs.
    const ns = `ours-${k}-${round}`
    out[name] = await deletedEvents(plane, ns, (begin) =>
      Effect.runPromise(
        Effect.flatMap(KubeApi, (api) => {
          let seen = 0
          return Effect.flatMap(api.list(R.Pods, ns, { limit: 1 }), ({ resourceVersion }) =>
            api.watch(R.Pods, ns, { resourceVersion }).pipe(
              Stream.tap((e) => Effect.sync(() => void (e.type === "DELETED" && (projectPod(e.object), seen++)))),
              Stream.takeUntil(() => seen >= N),
              Stream.runDrain,
              Effect.fork,
              Effect.tap(() => Effect.sleep("300 millis").pipe(Effect.zipRight(Effect.sync(begin)))),
              Effect.flatMap((f) => f.await)
            )
          )
        }).pipe(Effect.provide(stack(plane)))
      ).then(() => undefined)
    )
  }
  const agent = rawAgent(plane)
  const viaUndici = await deletedEvents(plane, `raw-${round}`, async (begin) => {
    const listed = await request(`${plane.server}/api/v1/namespaces/raw-${round}/pods?limit=1`, { dispatcher: agent, headers: { Authorization: `Bearer ${plane.token}` } })
    const { metadata } = (await listed.body.json()) as { metadata: { resourceVersion: string } }
    const res = await fetch(`${plane.server}/api/v1/namespaces/raw-${round}/pods?watch=true&resourceVersion=${metadata.resourceVersion}`, { dispatcher: agent, headers: { Authorization: `Bearer ${plane.token}` } })
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    let seen = 0
    setTimeout(begin, 300)
    while (seen < N) {
      const { done, value } = await reader.read()
      if (done) break
      buffer += decoder.decode(value, { stream: true })
      const lines = buffer.split("\n")
      buffer = lines.pop()!
      for (const line of lines) {
        const e = line === "" ? undefined : (JSON.parse(line) as { type: string; object: Parameters<typeof projectPod>[0] })
        if (e?.type === "DELETED") {
          projectPod(e.object)
          seen++
        }
      }
    }
    await reader.cancel()
  })
  await agent.close()
  return { ...out, "undici fetch + JSON.parse alone": viaUndici }
}

const LISTS = 5
/** Per pod listed (the pods of namespace "listed"), this process's CPU and the API server's, for each way the re-check may list. */
const listRound = async (plane: BenchPlane): Promise<Record<string, number>> => {
  const apiserver = planePids(plane).apiserver!
  const out: Record<string, number> = {}
  for (const [name, options] of [["metadata only", { metadataOnly: true }], ["names only (Table)", { metadataOnly: true, namesOnly: true }]] as const) {
    const once = () => Effect.runPromise(Effect.flatMap(KubeApi, (api) => Effect.forEach(Array.from({ length: LISTS }), () => listAll(api, options), { discard: true })).pipe(Effect.provide(driver(plane))))
    await once() // warm-up
    const server0 = cpuSeconds(apiserver)
    out[`${name}, this process`] = await cpuPer(N * LISTS, once)
    out[`${name}, kube-apiserver`] = ((cpuSeconds(apiserver) - server0) * 1000) / (N * LISTS)
  }
  return out
}

/** Every page of the namespace's pods. */
const listAll = (api: KubeApi["Type"], options: ReadOptions) =>
  Effect.gen(function* () {
    let token: string | undefined
    do {
      const page = yield* api.list(R.Pods, "listed", { ...options, limit: 500, continue: token })
      token = page.continue
    } while (token !== undefined)
  })

const what = { requests: "GET (404)", watch: "DELETED event", list: "pod listed" }[mode]
const plane = await startBenchPlane()
try {
  if (mode === "list") await createPods(plane, "listed")
  await measureBackground()
  process.stdout.write(`background: ${background.toFixed(1)} ms CPU per second, subtracted\n`)
  const all = new Map<string, Array<number>>()
  for (let round = 0; round < ROUNDS; round++) {
    const figures = mode === "requests" ? await requestsRound(plane) : mode === "watch" ? await watchRound(plane, round) : await listRound(plane)
    for (const [name, ms] of Object.entries(figures)) {
      all.set(name, [...(all.get(name) ?? []), ms])
      process.stdout.write(`round ${round + 1}, ${what}: ${name} ${ms.toFixed(3)} ms CPU each\n`)
    }
  }
  for (const [name, figures] of all) {
    const s = spread(figures)
    process.stdout.write(`${what}: ${name} ${s.median.toFixed(3)} ms CPU each, median of ${figures.length} (${s.min.toFixed(3)}–${s.max.toFixed(3)})\n`)
  }
} finally {
  await plane.stop()
}
