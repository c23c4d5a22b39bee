/**
 * The scenarios over BenchEnv (mass deletion, single deletions and their floor, one isolated pod,
 * informer sync) and how their requests are counted; raw numbers, which bench/lib/rows.ts tabulates.
 */
import { setTimeout as sleep } from "node:timers/promises"
import { Duration, Effect, Either, Fiber, Layer, Schedule, Stream } from "effect"
import { REASON_GARBAGE_COLLECTED, garbageCollectedMessage } from "../../src/domain/events.ts"
import { formatIP, parseCidr } from "../../src/domain/ip.ts"
import { reservationName } from "../../src/domain/pool.ts"
import { type ReleaseEntry, releaseOps } from "../../src/services/IPPoolStore.ts"
import { deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { simulationStores } from "../../src/testing/layers.ts"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import { COMPONENT } from "../../src/services/EventRecorder.ts"
import { KubeApi, type KubeApiShape, type KubeObject, around } from "../../src/services/KubeApi.ts"
import { type KubeError, isRetryableKubeError } from "../../src/services/KubeError.ts"
import * as R from "../../src/services/resources.ts"
import { type BenchEnv, type Contender, cpuDelta, type Limits, type Reading, SHIPPED } from "./env.ts"
import type { Kind } from "./proc.ts"
import { delta, histogramBetween, type Sample, sum } from "./prom.ts"
import { podInformer } from "./pods.ts"
import { type Percentiles, percentiles } from "./stats.ts"
import { type Network, POOL_NAMESPACE, type StartedPod, clearPools, deleteAll, makeTracker, networks, restCheck, startPods } from "./world.ts"

/** The controller's (and the baseline's) requests by verb, resource and code. */
export const API_REQUESTS = "whereabouts_controller_api_requests_total"
const FREED = "whereabouts_controller_ips_freed_total"
/** Events written (both contenders record through the project's EventRecorder, which counts them). */
const WRITTEN = "whereabouts_controller_events_total"
/** A freed batch's histogram; a checkout from before its rename (bench/ab.ts's batch count) has only the former name. */
const BATCH_HISTOGRAM = "whereabouts_controller_free_batch_duration_seconds"
const batchHistogram = (samples: ReadonlyArray<Sample>): string =>
  samples.some((s) => s.name === `${BATCH_HISTOGRAM}_count`) ? BATCH_HISTOGRAM : "whereabouts_controller_reconcile_duration_seconds"

/** Controller-side request counts, "verb resource code", without watches and leader-election leases. */
export const callsBetween = (before: ReadonlyArray<Sample>, after: ReadonlyArray<Sample>): Record<string, number> => {
  const all = delta(before, after, API_REQUESTS, ["verb", "resource", "code"])
  return Object.fromEntries(Object.entries(all).filter(([k]) => !k.startsWith("watch ") && !k.includes(" leases ")))
}

/** The requests of a count whose key, split at its spaces, passes `f`. */
export const sumWhere = (calls: Readonly<Record<string, number>>, f: (parts: ReadonlyArray<string>) => boolean): number =>
  Object.entries(calls).filter(([k]) => f(k.split(" "))).reduce((a, [, n]) => a + n, 0)
export const count = (calls: Record<string, number>, verb: string, resource: string, code?: string): number =>
  sumWhere(calls, ([v, r, c]) => v === verb && r === resource && (code === undefined || c === code))
/** All requests of a count, and its writes. */
export const total = (calls: Record<string, number>): number => sumWhere(calls, () => true)
export const writes = (calls: Record<string, number>): number => sumWhere(calls, ([v]) => ["create", "patch", "delete", "replace"].includes(v!))

/** apiserver_request_total of everything but the benchmark's own pod deletions, watches and non-resource paths. */
const serverCallsBetween = (before: ReadonlyArray<Sample>, after: ReadonlyArray<Sample>): Record<string, number> => {
  const all = delta(before, after, "apiserver_request_total", ["verb", "resource", "code"])
  return Object.fromEntries(Object.entries(all).filter(([k]) => !k.startsWith("WATCH ") && !k.startsWith("DELETE pods ") && k.split(" ")[1] !== ""))
}

/** The same requests, leases left out too, as one running total. */
const serverTotal = (samples: ReadonlyArray<Sample>) => sumWhere(serverCallsBetween([], samples), ([, r]) => r !== "leases")

/** When `read()` first reached `target` (performance.now(), polled every 50 ms; a failed read is not yet); NaN after `timeoutMs`. */
const waitUntil = async (read: () => Promise<number>, target: number, timeoutMs: number): Promise<number> => {
  for (const deadline = Date.now() + timeoutMs; Date.now() <= deadline; await sleep(50)) {
    if ((await read().catch(() => -1)) >= target) return performance.now()
  }
  return Number.NaN
}

/** When `read` of a contender's scrape reached `target`; NaN after `timeoutMs`. */
const waitScraped = (c: Contender, read: (s: ReadonlyArray<Sample>) => number, target: number, timeoutMs: number) =>
  Effect.promise(() => waitUntil(() => Effect.runPromise(c.scrape).then(read), target, timeoutMs))

/** The CNI simulation's services over the driver's KubeApi. */
const cniLayer = (api: KubeApiShape) => simulationStores.pipe(Layer.provide(Layer.mergeAll(Layer.succeed(KubeApi, api), ControllerConfig.layerWith())))

/**
 * Samples a cumulative counter every `everyMs`; `stop` yields requests per second per interval,
 * `peak` the highest one-second rate seen, `max10s` the highest 10-second average.
 */
export const rateSampler = (read: () => Promise<number>, everyMs = 1000) => {
  const points: Array<{ t: number; v: number }> = []
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  const tick = async () => {
    if (stopped) return
    const t = performance.now()
    // A missed sample only widens one interval.
    await read().then((v) => points.push({ t, v }), () => undefined)
    if (!stopped) timer = setTimeout(tick, everyMs - ((performance.now() - (points[0]?.t ?? 0)) % everyMs))
  }
  const started = tick()
  return {
    stop: async () => {
      await started
      stopped = true
      if (timer !== undefined) clearTimeout(timer)
      await tick().catch(() => undefined)
      const rates: Array<number> = []
      // Whole intervals only: the last one (cut short by stop) would scale a few requests up to a rate.
      for (let i = 1; i < points.length; i++) {
        const dt = points[i]!.t - points[i - 1]!.t
        if (dt >= everyMs * 0.9) rates.push(((points[i]!.v - points[i - 1]!.v) * 1000) / dt)
      }
      const windows: Array<number> = []
      for (let i = 10; i < points.length; i++) windows.push(((points[i]!.v - points[i - 10]!.v) * 1000) / Math.max(1, points[i]!.t - points[i - 10]!.t))
      return {
        perSecond: rates.map((r) => Math.round(r * 10) / 10),
        peak: rates.length === 0 ? 0 : Math.max(...rates),
        max10s: windows.length === 0 ? undefined : Math.max(...windows),
        total: (points[points.length - 1]?.v ?? 0) - (points[0]?.v ?? 0),
        // The samples themselves (ms since the first, cumulative count), for exact window bounds.
        points: points.map((p) => [Math.round((p.t - points[0]!.t) * 10) / 10, p.v] as const)
      }
    }
  }
}

/** Pod starts the allocator keeps running at once: on a slowed server they must not pile up and all race for one free address. */
export const ALLOCATOR_IN_FLIGHT = 20

/** Starts a pod every 1000/rate ms with the real CNI simulation (startPod) until interrupted; a tick with ALLOCATOR_IN_FLIGHT starts running is skipped. */
const runAllocator = (api: KubeApiShape, ns: string, nets: ReadonlyArray<Network>, rate: number) =>
  Effect.gen(function* () {
    // Its own KubeApi, counting its calls by verb, resource and outcome ("ok" or the failure's reason).
    const counts = new Map<string, number>()
    const bump = (k: string) => Effect.sync(() => counts.set(k, (counts.get(k) ?? 0) + 1))
    const counted = around(api, ({ verb, resource }, e) => Effect.tapBoth(e, { onSuccess: () => bump(`${verb} ${resource.plural} ok`), onFailure: (x) => bump(`${verb} ${resource.plural} ${x.reason}`) }))
    const layer = Layer.merge(cniLayer(counted), Layer.succeed(KubeApi, counted))
    const stats = { started: 0, failed: 0, skipped: 0, errors: [] as Array<string> }
    let running = 0
    const started: Array<string> = []
    const one = (i: number) =>
      startPod(ns, `alloc-${i}`, [{ nad: { namespace: ns, name: nets[i % nets.length]!.nad }, ifname: "net1" }]).pipe(
        Effect.provide(layer),
        Effect.either,
        Effect.ensuring(Effect.sync(() => void running--)),
        Effect.map((r) => {
          if (Either.isRight(r)) {
            stats.started++
            started.push(`alloc-${i}`)
          } else {
            stats.failed++
            if (stats.errors.length < 5) stats.errors.push(r.left.message)
          }
        })
      )
    const t0 = performance.now()
    const fibers: Array<Fiber.RuntimeFiber<void>> = []
    const loop = Effect.gen(function* () {
      for (let i = 0; ; i++) {
        const wait = t0 + (i * 1000) / rate - performance.now()
        if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
        if (running >= ALLOCATOR_IN_FLIGHT) {
          stats.skipped++
          continue
        }
        running++
        // Daemons: a pod being started when the allocator stops finishes starting (no half-started pods).
        fibers.push(yield* Effect.forkDaemon(one(i)))
      }
    })
    const fiber = yield* Effect.fork(loop)
    return {
      names: started,
      stop: Effect.gen(function* () {
        yield* Fiber.interrupt(fiber)
        yield* Fiber.joinAll(fibers)
        const calls = Object.fromEntries(counts)
        const poolPatches = count(calls, "patch", "ippools")
        return { ...stats, poolPatches, poolConflicts: poolPatches - count(calls, "patch", "ippools", "ok") }
      })
    }
  })

export interface MassOptions {
  readonly pods: number
  readonly pools: number
  /** Whereabouts interfaces per pod, each on another network. */
  readonly perPod: number
  readonly limits: Limits
  readonly label: string
  /** Pods per second the CNI simulation starts in the same pools during the deletion. */
  readonly allocatorRate?: number
  /** The API server's own counters (real server only). */
  readonly serverCounts?: () => Promise<ReadonlyArray<Sample>>
  /** Also sample the API server's counters every second (costly: megabytes of text per sample). */
  readonly serverRates?: boolean
  readonly timeoutMs?: number
  /** Every pod's spec.nodeName (default: spread over node-0..49). */
  readonly nodeName?: string
  /** Each network as the contender needs it (upstream's: its NAD naming a flat file). */
  readonly network?: (n: Network) => Network
  /** How the pods are deleted (default `deleteAll`: 16 deletes in flight, grace 0). */
  readonly deleteWith?: (pods: ReadonlyArray<StartedPod>) => Effect.Effect<{ readonly firstIssued: number; readonly lastReturned: number }, Error, KubeApi>
  /** Leave the pools and reservations of the pool namespace as they are (a standing world's are there). */
  readonly keepPools?: boolean
}

/** The controller's and the baseline's metrics: both count requests and record Events as the project does. */
const OWN_READING: Reading = { calls: callsBetween, eventsOut: (s) => sum(s, WRITTEN, { result: "written" }) }

/** Every pod deleted at once (16 deletes in flight, grace 0); times until all their addresses are free, and until the contender's Events are out. */
export const massDeletion = <K extends string>(env: BenchEnv<K>, kind: K, o: MassOptions) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const ns = `md-${o.label}`
    const nets = networks(ns, o.pools).map(o.network ?? ((n) => n))
    const perPod = o.perPod
    const { started, refs } = yield* startPods(ns, nets, o.pods, perPod, o.nodeName)
    const run = yield* Effect.scoped(
      Effect.gen(function* () {
        const t1 = performance.now()
        const c = yield* env.start(kind, o.limits, o.label)
        const startMs = performance.now() - t1
        const { calls, eventsOut } = c.reading ?? OWN_READING
        const tracker = yield* makeTracker()
        yield* tracker.allHeld(refs, o.pods * perPod)
        const m0 = yield* c.scrape
        const s0 = o.serverCounts === undefined ? undefined : yield* Effect.promise(o.serverCounts)
        const cpu0 = env.cpu(c)
        const sampler = rateSampler(() => Effect.runPromise(Effect.map(c.scrape, (s) => total(calls([], s)))))
        const serverSampler = o.serverRates === true && o.serverCounts !== undefined ? rateSampler(async () => serverTotal(await o.serverCounts!())) : undefined
        const allocator = o.allocatorRate === undefined ? undefined : yield* runAllocator(api, ns, nets, o.allocatorRate)
        const del = yield* (o.deleteWith === undefined ? deleteAll(started) : o.deleteWith(started))
        const timeoutMs = o.timeoutMs ?? 600_000
        const freed = yield* tracker.allFreed(refs, timeoutMs, del.lastReturned)
        const eventsOutAt = yield* waitScraped(c, (s) => eventsOut(s) - eventsOut(m0), o.pods * perPod, Number.isNaN(freed.pool) ? 1 : 120_000)
        const alloc = allocator === undefined ? undefined : yield* allocator.stop
        // Let the last writes (the allocator's, the contender's Events, upstream's lease releases) land before counting.
        yield* Effect.sleep("1 second")
        const rates = yield* Effect.promise(() => sampler.stop())
        const serverRates = serverSampler === undefined ? undefined : yield* Effect.promise(() => serverSampler.stop())
        const m1 = yield* c.scrape
        const batchCount = `${batchHistogram(m1)}_count`
        const s1 = o.serverCounts === undefined ? undefined : yield* Effect.promise(o.serverCounts)
        const cpu = cpuDelta(cpu0, env.cpu(c))
        const memory = c.proc.memory()
        const rest = yield* restCheck(ns)
        if (allocator !== undefined) yield* deleteAll(allocator.names.map((name) => ({ namespace: ns, name })))
        return {
          kind,
          pods: o.pods,
          perPod,
          pools: o.pools,
          limits: o.limits,
          startMs,
          deleteWindowMs: del.lastReturned - del.firstIssued,
          // From the last delete's return until every pool entry, every reservation, every Event of the deleted pods (NaN: not within timeoutMs).
          poolFreedMs: freed.pool,
          reservationsFreedMs: freed.reservations,
          timeoutMs,
          eventsMs: eventsOutAt - del.lastReturned,
          calls: calls(m0, m1),
          // Deletion batches the controller ran (its batch histogram's count); 0 for the others.
          batches: sum(m1, batchCount) - sum(m0, batchCount),
          ...(s0 === undefined || s1 === undefined ? {} : { serverCalls: serverCallsBetween(s0, s1) }),
          cpu,
          rates,
          ...(serverRates === undefined ? {} : { serverRates }),
          rest,
          ...(alloc === undefined ? {} : { allocator: alloc }),
          memory
        }
      })
    )
    if (o.keepPools !== true) yield* clearPools
    return run
  })

export type MassRun = Effect.Effect.Success<ReturnType<typeof massDeletion>>

const SINGLE_POOLS = 10

export interface SingleOptions extends Pick<MassOptions, "pods" | "limits" | "label" | "timeoutMs" | "keepPools"> {
  /** Deletions per second. */
  readonly rate: number
}

type StepLatency = Pick<Percentiles, "n" | "mean" | "p50" | "p95" | "p99">

/** The step of freeing a batch: its n and mean are the batches a run took and their mean duration. */
export const BATCH_STEP = "freeing of a batch (Events not included)"

/** The contender's step histograms: label, metric, labels (for requests: `verb` and `resource`). */
const STEPS: ReadonlyArray<readonly [string, string, Readonly<Record<string, string>>]> = [
  ["deletion event → a worker takes it", "whereabouts_controller_workqueue_queue_duration_seconds", {}],
  [BATCH_STEP, BATCH_HISTOGRAM, {}],
  ["GET pod (re-check)", "whereabouts_controller_api_request_duration_seconds", { verb: "get", resource: "pods" }],
  ["LIST pods (re-check of a large batch)", "whereabouts_controller_api_request_duration_seconds", { verb: "list", resource: "pods" }],
  ["DELETE reservation", "whereabouts_controller_api_request_duration_seconds", { verb: "delete", resource: "overlappingrangeipreservations" }],
  ["GET pool", "whereabouts_controller_api_request_duration_seconds", { verb: "get", resource: "ippools" }],
  ["PATCH pool", "whereabouts_controller_api_request_duration_seconds", { verb: "patch", resource: "ippools" }],
  ["POST Event", "whereabouts_controller_api_request_duration_seconds", { verb: "create", resource: "events" }],
  ["PATCH Event (a repeated one's count)", "whereabouts_controller_api_request_duration_seconds", { verb: "patch", resource: "events" }]
]

/** The contender's step histograms between two scrapes (steps it never took are left out). */
const stepLatencies = (before: ReadonlyArray<Sample>, after: ReadonlyArray<Sample>): Record<string, StepLatency> => {
  const out: Record<string, StepLatency> = {}
  for (const [label, name, labels] of STEPS) {
    const h = histogramBetween(before, after, name, labels)
    if (h === undefined) continue
    const [p50, p95, p99] = h.quantiles.map((q) => q * 1000)
    out[label] = { n: h.count, mean: h.mean * 1000, p50: p50!, p95: p95!, p99: p99! }
  }
  return out
}

/**
 * Deletes the pods (grace 0) one every 1000/rate ms from 100 ms from now, each DELETE (and then
 * `after`, if given) in a fiber of its own; joins them all. Per pod, in order: when its DELETE was
 * issued, and how long it took to answer.
 */
const deleteAtRate = <E>(started: ReadonlyArray<StartedPod>, rate: number, after?: (p: StartedPod) => Effect.Effect<void, E>) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const t0 = performance.now() + 100
    const issued: Array<number> = []
    const answered: Array<number> = []
    const fibers: Array<Fiber.RuntimeFiber<unknown, unknown>> = []
    for (const [i, p] of started.entries()) {
      const wait = t0 + (i * 1000) / rate - performance.now()
      if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
      const now = performance.now()
      issued[i] = now
      const deleted = api.delete(R.Pods, p.namespace, p.name, { gracePeriodSeconds: 0 }).pipe(Effect.tap(() => Effect.sync(() => void answered.push(performance.now() - now))))
      fibers.push(yield* Effect.fork(after === undefined ? deleted : Effect.zipRight(deleted, after(p))))
    }
    yield* Fiber.joinAll(fibers).pipe(Effect.orDie)
    return { issued, answered }
  })

/** Per pod whose `at` is known: ms from its DELETE (`issued`, in `refs`' order) to then. */
const sinceIssued = (refs: ReadonlyArray<string>, issued: ReadonlyArray<number>, at: (ref: string) => number | undefined) =>
  refs.flatMap((r, i) => {
    const t = at(r)
    return t === undefined ? [] : [t - issued[i]!]
  })

/** Deletes pods one by one at a steady rate; per pod, delete → address free. */
export const singleDeletions = (env: BenchEnv, kind: Kind, o: SingleOptions) =>
  Effect.gen(function* () {
    const ns = `sd-${o.label}`
    const { started, refs } = yield* startPods(ns, networks(ns, SINGLE_POOLS), o.pods)
    const run = yield* Effect.scoped(
      Effect.gen(function* () {
        const c = yield* env.start(kind, o.limits, o.label)
        const tracker = yield* makeTracker()
        yield* tracker.allHeld(refs, o.pods)
        const m0 = yield* c.scrape
        const cpu0 = env.cpu(c)
        const { issued, answered } = yield* deleteAtRate(started, o.rate)
        yield* tracker.allFreed(refs, o.timeoutMs ?? 600_000)
        const m1 = yield* c.scrape
        const cpu = cpuDelta(cpu0, env.cpu(c))
        const poolLat = sinceIssued(refs, issued, tracker.poolFreedAt)
        const rest = yield* restCheck(ns)
        return {
          kind,
          pods: o.pods,
          rate: o.rate,
          limits: o.limits,
          pool: percentiles(poolLat),
          reservation: percentiles(sinceIssued(refs, issued, tracker.reservationsFreedAt)),
          completed: poolLat.length,
          calls: callsBetween(m0, m1),
          cpu,
          rest,
          // The benchmark's own pod DELETE calls, issue → answer: how loaded the API server is.
          deleteCall: percentiles(answered),
          steps: stepLatencies(m0, m1)
        }
      })
    )
    if (o.keepPools !== true) yield* clearPools
    return run
  })

export type SingleRun = Effect.Effect.Success<ReturnType<typeof singleDeletions>>

/** One single-interface pod started by the CNI simulation among 50 others and deleted alone, three times, at the shipped limits. */
export const isolatedPod = (env: BenchEnv, kind: Kind, label: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const ns = `ip-${label}`
    const nets = networks(ns, 2)
    const { started: background } = yield* startPods(ns, nets, 50)
    const run = yield* Effect.scoped(
      Effect.gen(function* () {
        const c = yield* env.start(kind, SHIPPED, label)
        const tracker = yield* makeTracker()
        // Per sample: the controller-side calls for that one deletion, and delete issued → address and reservation free.
        const samples: Array<Record<string, number>> = []
        const latencyMs: Array<number> = []
        for (let s = 0; s < 3; s++) {
          const pod = yield* startPod(ns, `solo-${s}`, [{ nad: { namespace: ns, name: nets[0]!.nad }, ifname: "net1" }]).pipe(Effect.provide(cniLayer(api)))
          const ref = `${ns}/solo-${s}`
          yield* tracker.until(() => tracker.held(ref) === 1 && tracker.reservationsOf(ref) === 1, "allocated", 30_000)
          // Let the contender's informers see the pod (and its network-status) before it goes.
          yield* Effect.sleep("1 second")
          const m0 = yield* c.scrape
          const t = performance.now()
          yield* deletePod(pod).pipe(Effect.provide(cniLayer(api)))
          yield* tracker.until(() => tracker.held(ref) === 0 && tracker.reservationsOf(ref) === 0, "freed", 60_000)
          latencyMs.push(Math.max(tracker.poolFreedAt(ref) ?? t, tracker.reservationsFreedAt(ref) ?? t) - t)
          yield* waitScraped(c, (s) => sum(s, FREED), sum(m0, FREED) + 1, 30_000)
          yield* Effect.sleep("500 millis")
          samples.push(callsBetween(m0, yield* c.scrape))
        }
        return { kind, samples, latencyMs }
      })
    )
    // The background pods go too: the next scenario's pods get the same addresses from fresh pools,
    // and a live pod that still lists one keeps it held for it (the controller never frees that).
    yield* deleteAll(background)
    yield* clearPools
    return run
  })

export type IsolatedRun = Effect.Effect.Success<ReturnType<typeof isolatedPod>>

/** List + watch of every pod until synced, caching projections (ours) or whole objects (baseline); ms. */
export const informerSync = (kind: Kind) =>
  Effect.scoped(
    Effect.gen(function* () {
      const t = performance.now()
      const informer = yield* podInformer(kind === "ours")
      yield* informer.awaitSynced
      return { ms: performance.now() - t, pods: informer.byKey.size }
    })
  )

/** Per podref of `refs`, what the guarded patch needs: its pool, network and entry (key and container id, as the pool holds them). */
const poolEntries = (nets: ReadonlyArray<Network>, refs: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const wanted = new Set(refs)
    const entryOf = new Map<string, { pool: string; network: string; entry: ReleaseEntry }>()
    for (const n of nets) {
      const range = parseCidr(n.range)!
      const pool = yield* api.get(R.IPPools, POOL_NAMESPACE, n.pool)
      const allocations = (pool["spec"] as { allocations?: Record<string, { podref: string; id: string; ifname?: string }> }).allocations ?? {}
      for (const [key, a] of Object.entries(allocations)) {
        if (!wanted.has(a.podref)) continue
        entryOf.set(a.podref, { pool: n.pool, network: n.nad, entry: { key, podref: a.podref, id: a.id, ip: { family: range.family, value: range.address + BigInt(key) }, ifname: a.ifname ?? "net1" } })
      }
    }
    return entryOf
  })

/**
 * What the controller sends for one deleted pod, in the executor's order: the re-check GET, the
 * reservation DELETE, then the guarded patch with the Event alongside. A request the server could
 * not answer now is sent again, as a controller would; any other failure goes to `failures`.
 */
const floorRequests = (api: KubeApiShape, { namespace, name }: StartedPod, at: { readonly pool: string; readonly network: string; readonly entry: ReleaseEntry }, failures: Array<string>) =>
  Effect.gen(function* () {
    const ref = `${namespace}/${name}`
    const note = <A>(e: Effect.Effect<A, KubeError>) =>
      e.pipe(
        Effect.retry({ times: 5, schedule: Schedule.exponential("100 millis"), while: isRetryableKubeError }),
        Effect.asVoid,
        Effect.catchAll((err) => Effect.sync(() => void failures.push(`${ref}: ${err.reason}: ${err.message}`)))
      )
    const live = yield* Effect.either(api.get(R.Pods, namespace, name))
    if (Either.isRight(live)) failures.push(`${ref}: the re-check found the pod`)
    else if (live.left.reason !== "NotFound") yield* note(Effect.fail(live.left))
    yield* note(api.delete(R.OverlappingRangeIPReservations, POOL_NAMESPACE, reservationName(at.entry.ip, "")))
    const now = new Date().toISOString()
    const event: KubeObject = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: `${name}.floor`, namespace },
      involvedObject: { apiVersion: "v1", kind: "Pod", namespace, name },
      reason: REASON_GARBAGE_COLLECTED,
      message: garbageCollectedMessage(formatIP(at.entry.ip), at.network),
      type: "Normal",
      source: { component: COMPONENT },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1
    }
    yield* Effect.all([note(api.patch(R.IPPools, POOL_NAMESPACE, at.pool, { type: "json", ops: releaseOps([at.entry]) })), note(api.create(R.Events, namespace, event))], {
      concurrency: 2,
      discard: true
    })
  })

/**
 * The floor under the single deletions: their world and stream with no controller. As each pod's
 * DELETE is answered the benchmark sends what the controller sends for it (`floorRequests`), with
 * no queue, batching, client limit or informer, a pod and a pool watch open: what the API server
 * takes for the requests alone.
 */
export const singleFloor = (env: BenchEnv, o: Pick<SingleOptions, "pods" | "rate" | "label">) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const ns = `sd-${o.label}`
    const nets = networks(ns, SINGLE_POOLS)
    const { started, refs } = yield* startPods(ns, nets, o.pods)
    const entryOf = yield* poolEntries(nets, refs)
    const run = yield* Effect.scoped(
      Effect.gen(function* () {
        const tracker = yield* makeTracker()
        yield* tracker.allHeld(refs, o.pods)
        for (const [r, ns_] of [[R.Pods, undefined], [R.IPPools, POOL_NAMESPACE]] as const) {
          yield* Effect.forkScoped(Effect.ignore(Stream.runDrain(api.watch(r, ns_, { resourceVersion: "0" }))))
        }
        yield* Effect.sleep(Duration.seconds(2))
        const cpu0 = env.cpu()
        const failures: Array<string> = []
        const { issued } = yield* deleteAtRate(started, o.rate, (p) => floorRequests(api, p, entryOf.get(`${p.namespace}/${p.name}`)!, failures))
        yield* tracker.allFreed(refs, 120_000)
        const cpu = cpuDelta(cpu0, env.cpu())
        const poolLat = sinceIssued(refs, issued, tracker.poolFreedAt)
        return {
          pods: o.pods,
          rate: o.rate,
          pool: percentiles(poolLat),
          reservation: percentiles(sinceIssued(refs, issued, tracker.reservationsFreedAt)),
          completed: poolLat.length,
          cpu,
          failures
        }
      })
    )
    yield* clearPools
    return run
  })
