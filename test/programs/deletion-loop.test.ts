import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Either, Exit, Fiber, HashMap, Layer, Logger, Option, type Scope, Stream, TestClock } from "effect"
import { type RunningPod, deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { runDeletionLoop } from "../../src/programs/deletion-loop.ts"
import { RECLAIM_AFTER_PODS, RECLAIM_IDLE_MS } from "../../src/programs/memory.ts"
import { DEFAULT_BATCHING } from "../../src/services/Batcher.ts"
import { withKubeApi } from "../../src/programs/layers.ts"
import { memory } from "../../src/testing/layers.ts"
import * as PluginStore from "../../src/testing/PluginStore.ts"
import { sweepUntilDone } from "../../src/programs/sweep.ts"
import { Caches } from "../../src/services/Caches.ts"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import { InMemoryCluster, MemoryClusterState, layerMemory as memoryKubeApi } from "../../src/testing/InMemoryCluster.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import { LeaderElection } from "../../src/services/LeaderElection.ts"
import * as NadConfigs from "../../src/services/NadConfigs.ts"
import * as R from "../../src/services/resources.ts"
import {
  CLEAN,
  metric,
  on,
  poolState,
  restReport,
  retrySandbox,
  settle,
  settleUntil,
  startDeletionLoop
} from "../support/controller.ts"
import { eventually, require } from "../support/eventually.ts"
import { ApiHooks, type MemoryEnv, gateOnce, memoryWithHooks } from "../support/hooks.ts"
import { cachesCaughtUp, createNad, eventsIn, podrefsOf, reservationNames } from "../support/world.ts"

const NS = "default"
const { stalledMs: STALLED_BATCH_MS } = DEFAULT_BATCHING
const BASE: Partial<ControllerConfig.ControllerConfigShape> = {
  concurrentBatches: 4,
  retryBaseDelay: Duration.millis(100),
  retryAttempts: 3,
  namespace: "kube-system"
}

/** The test body in its own scope inside the world, so the loop stops before the world does. */
const inWorld =
  (config: Partial<ControllerConfig.ControllerConfigShape> = {}) =>
  <A, E>(body: Effect.Effect<A, E, Scope.Scope | MemoryEnv>) =>
    Effect.scoped(body).pipe(Effect.provide(memory({ ...BASE, ...config })))

const START = Date.parse("2026-11-03T10:00:00Z")

/**
 * `inWorld` under TestClock, the world born at a real-looking time. Neither is cosmetic: near epoch 0
 * a jittered sleep leaves the TestClock at a fractional millisecond whose `× 1e6` is not an integer,
 * and `Clock.currentTimeNanos` (EventRecorder, LeaderElection) then throws a RangeError; and moving
 * the clock to 2026 after the informers started would fire every watch timeout in between.
 */
const inTestWorld =
  (config: Partial<ControllerConfig.ControllerConfigShape> = {}) =>
  <A, E>(body: Effect.Effect<A, E, Scope.Scope | MemoryEnv>) =>
    Effect.zipRight(TestClock.setTime(START), inWorld(config)(body))

/** `inTestWorld` with ApiHooks (`memoryWithHooks`): TestClock at START, the body in its own scope. */
const inHookedTestWorld =
  (config: Partial<ControllerConfig.ControllerConfigShape> = {}) =>
  <A, E>(body: Effect.Effect<A, E, Scope.Scope | Layer.Layer.Success<ReturnType<typeof memoryWithHooks>>>) =>
    Effect.zipRight(TestClock.setTime(START), Effect.scoped(body).pipe(Effect.provide(memoryWithHooks({ ...BASE, ...config }))))


/** Real time: waits until the metric reaches `n`. */
const metricReaches = (name: string, labels: Record<string, string>, n: number) =>
  eventually(Effect.filterOrFail(metric(name, labels), (v) => v === n, (v) => `${name} is ${v}, waiting for ${n}`))

const gcMessage = (ip: string, network: string) => `successful cleanup of IP address [${ip}] from network ${network}`

const firstIP = (p: RunningPod) => p.ips[0]!.ips[0]!

/** NAD net1 on `range`, the deletion loop started, then these pods on net1, the caches caught up. */
const loopWithPods = <const N extends ReadonlyArray<string>>(range: string, names: N) =>
  Effect.gen(function* () {
    yield* createNad(NS, "net1", { range })
    const loop = yield* startDeletionLoop()
    const pods: Array<RunningPod> = []
    for (const name of names) pods.push(yield* startPod(NS, name, [on("net1")]))
    yield* cachesCaughtUp
    // One pod per name, in order (a tuple for literal names).
    return { loop, pods: pods as unknown as { readonly [K in keyof N]: RunningPod } }
  })

/** `prefix0` … `prefix{n-1}`. */
const named = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`)

/**
 * Deletes the pods on the cluster directly, in one go, as a namespace deletion or a node's
 * eviction reaches a watcher: a burst of DELETED events (no CNI DEL), no fiber running in between.
 */
const deleteAtOnce = (pods: ReadonlyArray<RunningPod>) =>
  Effect.flatMap(InMemoryCluster, (cluster) =>
    Effect.sync(() => {
      for (const p of pods) cluster.delete(R.Pods, NS, p.name, { gracePeriodSeconds: 0 })
    })
  )

describe("deletion loop: end to end", () => {
  it.live("frees exactly the deleted pods' addresses, one Normal event per IP, counted in metrics", () =>
    inWorld()(
      Effect.gen(function* () {
        yield* createNad(NS, "net1", { range: "10.100.0.0/24" })
        yield* startDeletionLoop()
        const pods: Array<RunningPod> = []
        for (let i = 0; i < 10; i++) pods.push(yield* startPod(NS, `p${i}`, [on("net1")]))
        const gone = pods.filter((_, i) => i % 3 === 0)
        const kept = pods.filter((_, i) => i % 3 !== 0)
        for (const p of gone) yield* deletePod(p)

        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, gone.length)
        yield* eventually(Effect.flatMap(eventsIn(NS), (es) => require(() => es.length >= gone.length, "events")))

        expect(yield* podrefsOf("10.100.0.0-24")).toEqual(kept.map((p) => `${NS}/${p.name}`).sort())
        expect(yield* reservationNames).toEqual(kept.map(firstIP).sort())
        const events = yield* eventsIn(NS)
        expect([...events].sort((a, b) => a.name.localeCompare(b.name))).toEqual(
          gone.map((p) => expect.objectContaining({ type: "Normal", reason: "IPAddressGarbageCollected", message: gcMessage(firstIP(p), "net1"), name: p.name, count: 1 }))
        )
        // The live pods still hold exactly what their status says.
        const pool = yield* poolState("10.100.0.0-24")
        for (const p of kept) expect(pool.get(firstIP(p))).toMatchObject({ podref: `${NS}/${p.name}`, id: p.containerId })
        expect(yield* restReport("10.100.0.0-24")).toMatchObject(CLEAN)
        expect(yield* metric("ips_freed_total", { trigger: "deletion" })).toBe(4)
        expect(yield* metric("reservations_deleted_total", { trigger: "deletion" })).toBe(4)
        // Each deleted pod's wait in the queue observed once; every counted request also timed.
        expect(yield* metric("workqueue_queue_duration_seconds_count")).toBe(4)
        const patches = yield* metric("api_requests_total", { verb: "patch", resource: "ippools", code: "200" })
        expect(patches).toBeGreaterThanOrEqual(1)
        expect(yield* metric("api_request_duration_seconds_count", { verb: "patch", resource: "ippools" })).toBe(patches)
      })
    ))

  it.live("a reservation delete that fails after the address was freed: counted once, retried until the reservation is gone", () =>
    inWorld()(
      Effect.gen(function* () {
        const cluster = yield* InMemoryCluster
        const { pods: [pod] } = yield* loopWithPods("10.109.0.0/24", ["p"])
        cluster.injectFault({ verb: "delete", resource: "overlappingrangeipreservations" })
        yield* deletePod(pod)
        yield* eventually(Effect.flatMap(reservationNames, (names) => require(() => names.length === 0, "reservation deleted by the retry")))
        yield* metricReaches("reservations_deleted_total", { trigger: "deletion" }, 1)
        expect(yield* podrefsOf("10.109.0.0-24")).toEqual([])
        expect(yield* metric("ips_freed_total", { trigger: "deletion" })).toBe(1)
        expect(yield* metric("workqueue_retries_total")).toBe(1)
        expect((yield* eventsIn(NS)).map((e) => e.reason)).toEqual(["IPAddressGarbageCollected"])
      })
    ))

  it.live("a /30 runs out; freeing a leaked address lets the waiting pod start with exactly that address", () =>
    inWorld()(
      Effect.gen(function* () {
        yield* createNad(NS, "tiny", { range: "10.101.0.0/30" })
        yield* startDeletionLoop()
        const a = yield* startPod(NS, "a", [on("tiny")])
        const b = yield* startPod(NS, "b", [on("tiny")])
        expect([firstIP(a), firstIP(b)]).toEqual(["10.101.0.1", "10.101.0.2"])

        const failed = yield* Effect.either(startPod(NS, "c", [on("tiny")]))
        expect(Either.isLeft(failed) && failed.left).toMatchObject({
          _tag: "CniError",
          message: "could not allocate IP in range 10.101.0.0/30: every address from 10.101.0.1 to 10.101.0.2 is reserved or excluded"
        })

        yield* deletePod(b) // node lost: no CNI DEL
        yield* eventually(Effect.flatMap(podrefsOf("10.101.0.0-30"), (refs) => require(() => refs.length === 1, "b freed")))
        // The kubelet retries c's sandbox: the plugin now finds b's address free.
        const c = yield* retrySandbox(NS, "c", [on("tiny")], "c-retry")
        expect(firstIP(c)).toBe(firstIP(b))
        expect(yield* podrefsOf("10.101.0.0-30")).toEqual([`${NS}/a`, `${NS}/c`])
        expect(yield* reservationNames).toEqual(["10.101.0.1", "10.101.0.2"])
        expect(yield* restReport("10.101.0.0-30")).toMatchObject(CLEAN)
      })
    ))
})

describe("deletion loop: failures (TestClock)", () => {
  it.effect("an API outage mid-reconcile is retried with backoff until the write goes through", () =>
    inTestWorld()(
      Effect.gen(function* () {
        const cluster = yield* InMemoryCluster
        const patches = () => cluster.count({ verb: "patch", resource: "ippools" })
        yield* createNad(NS, "net1", { range: "10.102.0.0/24" })
        yield* startDeletionLoop()
        const p = yield* startPod(NS, "p", [on("net1")])
        yield* startPod(NS, "keep", [on("net1")])
        yield* settle
        cluster.resetCalls()
        cluster.injectFault({ verb: "patch", resource: "ippools", times: 2 })

        yield* deletePod(p)
        yield* settleUntil(() => Effect.map(metric("workqueue_retries_total"), (n) => n === 1), "first retry scheduled")
        yield* settle
        expect(patches()).toBe(1)
        expect(yield* podrefsOf("10.102.0.0-24")).toEqual([`${NS}/keep`, `${NS}/p`])

        // Exponential 100 ms, 200 ms, jittered by at most ±20 %: nothing before 80 ms.
        yield* TestClock.adjust("79 millis")
        yield* settle
        expect(patches()).toBe(1)
        yield* TestClock.adjust("41 millis")
        yield* settleUntil(() => Effect.map(metric("workqueue_retries_total"), (n) => n === 2), "second retry scheduled")
        expect(patches()).toBe(2)
        expect(yield* podrefsOf("10.102.0.0-24")).toEqual([`${NS}/keep`, `${NS}/p`])

        yield* TestClock.adjust("240 millis")
        yield* settleUntil(() => Effect.map(metric("ips_freed_total", { trigger: "deletion" }), (n) => n === 1), "freed")
        yield* settleUntil(() => Effect.map(eventsIn(NS), (es) => es.length === 1), "event recorded")
        expect(patches()).toBe(3)
        expect(yield* podrefsOf("10.102.0.0-24")).toEqual([`${NS}/keep`])
        expect(yield* reservationNames).toEqual(["10.102.0.2"])
        expect(yield* metric("workqueue_retries_total")).toBe(2)
        expect(yield* metric("failures_total", { reason: "RetriesExhausted" })).toBe(0)
        expect(yield* eventsIn(NS)).toEqual([
          expect.objectContaining({ type: "Normal", reason: "IPAddressGarbageCollected", message: gcMessage("10.102.0.1", "net1"), name: "p", count: 1 })
        ])
      })
    ))

  it.effect("retries spent: one Warning, the key dropped, counted, and the loop goes on", () =>
    inTestWorld()(
      Effect.gen(function* () {
        const cluster = yield* InMemoryCluster
        const patches = () => cluster.count({ verb: "patch", resource: "ippools" })
        yield* createNad(NS, "net1", { range: "10.103.0.0/24" })
        const loop = yield* startDeletionLoop()
        const p = yield* startPod(NS, "p", [on("net1")])
        const q = yield* startPod(NS, "q", [on("net1")])
        yield* settle
        cluster.resetCalls()
        cluster.injectFault({ verb: "patch", resource: "ippools", times: 1_000 })

        yield* deletePod(p)
        // retryAttempts 3: the first attempt and two retries (≤ 120 ms, then ≤ 240 ms later).
        yield* settleUntil(() => Effect.succeed(patches() === 1), "first attempt")
        yield* TestClock.adjust("120 millis")
        yield* settleUntil(() => Effect.succeed(patches() === 2), "second attempt")
        yield* TestClock.adjust("240 millis")
        yield* settleUntil(() => Effect.map(metric("failures_total", { reason: "RetriesExhausted" }), (n) => n === 1), "given up")
        yield* settleUntil(() => Effect.map(eventsIn(NS), (es) => es.length === 1), "Warning recorded")
        expect(patches()).toBe(3)
        expect(yield* metric("workqueue_retries_total")).toBe(2)
        expect(yield* eventsIn(NS)).toEqual([
          expect.objectContaining({ type: "Warning", reason: "IPAddressGarbageCollectionFailed", message: "failed to garbage collect addresses for pod default/p", name: "p", count: 1 })
        ])

        // Dropped: a minute later (twice the longest backoff) nobody tried again.
        for (let i = 0; i < 6; i++) yield* TestClock.adjust("10 seconds")
        yield* settle
        expect(patches()).toBe(3)
        expect(yield* podrefsOf("10.103.0.0-24")).toEqual([`${NS}/p`, `${NS}/q`])

        // The API is back: the loop still runs and frees the next deletion.
        cluster.clearFaults()
        yield* deletePod(q)
        yield* settleUntil(() => Effect.map(eventsIn(NS), (es) => es.length === 2), "q freed")
        expect(yield* podrefsOf("10.103.0.0-24")).toEqual([`${NS}/p`])
        expect(Option.isNone(yield* Fiber.poll(loop))).toBe(true)
        const events = yield* eventsIn(NS)
        expect(events.filter((e) => e.reason === "IPAddressGarbageCollectionFailed")).toHaveLength(1)
        expect(events).toContainEqual(expect.objectContaining({ type: "Normal", reason: "IPAddressGarbageCollected", message: gcMessage("10.103.0.2", "net1"), name: "q", count: 1 }))
        expect(yield* metric("failures_total", { reason: "RetriesExhausted" })).toBe(1)
        expect(patches()).toBe(4)
      })
    ))
})

describe("deletion loop: bad input", () => {
  it.live("a malformed annotation and a broken NAD get their one-line Warnings and are freed anyway, as is the pod deleted beside them", () =>
    inWorld()(
      Effect.gen(function* () {
        const api = yield* KubeApi
        const caches = yield* Caches
        yield* createNad(NS, "net1", { range: "10.104.0.0/24" })
        yield* createNad(NS, "net2", { range: "10.105.0.0/24" })
        yield* startDeletionLoop()
        const good = yield* startPod(NS, "good", [on("net1")])
        const garbled = yield* startPod(NS, "garbled", [on("net1")])
        const broken = yield* startPod(NS, "broken", [on("net2")])
        const later = yield* startPod(NS, "later", [on("net1")])
        yield* api.patch(R.Pods, NS, "garbled", {
          type: "merge",
          body: { metadata: { annotations: { "k8s.v1.cni.cncf.io/network-status": "[{not json" } } }
        })
        const badConfig = "{\"cniVersion\":\"0.3.1\",\"name\":\"net2\",\"type\":\"macvlan\",\"ipam\":{\"type\":\"whereabouts\",\"range\":\"10.105.0.0/33\"}}"
        yield* api.patch(R.NetworkAttachmentDefinitions, NS, "net2", { type: "merge", body: { spec: { config: badConfig } } })
        yield* eventually(
          require(() => Option.exists(caches.nads.get(`${NS}/net2`), (n) => n.config === badConfig), "NAD cache has the broken config")
        )
        yield* eventually(
          require(() => Option.exists(caches.pods.get(`${NS}/garbled`), (p) => p.networkStatus === "[{not json"), "pod cache has the garbled status")
        )

        for (const p of [garbled, broken, good]) yield* deletePod(p)
        // Bad input blocks nothing: all three are freed (the podref index finds what the annotation or NAD cannot say).
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, 3)
        yield* metricReaches("failures_total", { reason: "BadAnnotation" }, 1)
        yield* metricReaches("failures_total", { reason: "BadNadConfig" }, 1)

        expect(yield* podrefsOf("10.104.0.0-24")).toEqual([`${NS}/later`])
        expect(yield* podrefsOf("10.105.0.0-24")).toEqual([])
        const events = yield* eventsIn(NS)
        expect(events.map((e) => `${e.type} ${e.reason} ${e.name}`).sort()).toEqual([
          "Normal IPAddressGarbageCollected broken",
          "Normal IPAddressGarbageCollected garbled",
          "Normal IPAddressGarbageCollected good",
          "Warning InvalidIPAMConfig broken",
          "Warning InvalidNetworkAnnotation garbled"
        ])
        expect(events.find((e) => e.name === "garbled" && e.type === "Warning")!.message).toMatch(/^cannot read k8s\.v1\.cni\.cncf\.io\/network-status: not valid JSON .*; freed its 1 address found by podref$/)
        expect(events.find((e) => e.name === "broken" && e.type === "Warning")!.message).toBe(
          'cannot read network-attachment-definition default/net2: invalid CIDR "10.105.0.0/33"; freed its 1 address found by podref'
        )
        expect(events.find((e) => e.name === "good")!.message).toBe(gcMessage(firstIP(good), "net1"))
        // Nothing failed, nothing is retried.
        expect(yield* metric("workqueue_retries_total")).toBe(0)

        yield* deletePod(later)
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, 4)
        expect(yield* podrefsOf("10.104.0.0-24")).toEqual([])
      })
    ))
})

describe("deletion loop: mass deletions", () => {
  it.live("a mass deletion of 300 pods in one pool costs a handful of pool writes, not 300", () =>
    inWorld({ concurrentBatches: 4 })(
      Effect.gen(function* () {
        const cluster = yield* InMemoryCluster
        const { pods } = yield* loopWithPods("10.106.0.0/22", named("m", 300))
        cluster.resetCalls()
        yield* deleteAtOnce(pods)
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, 300)
        expect(yield* podrefsOf("10.106.0.0-22")).toEqual([])
        const patches = cluster.count({ verb: "patch", resource: "ippools" })
        expect(patches).toBeGreaterThanOrEqual(1)
        expect(patches).toBeLessThanOrEqual(10)
        expect(yield* reservationNames).toEqual([])
      })
    ))

  it.live(`after a mass deletion (${RECLAIM_AFTER_PODS} pods or more) the idle loop gives the heap back, once; a few deletions do not`, () => {
    const reclaims: Array<unknown> = []
    const logger = Logger.make(({ message, annotations }) => {
      if ((Array.isArray(message) ? message : [message]).join(" ") === "returned unused heap memory to the operating system") {
        reclaims.push(HashMap.get(annotations, "after").pipe(Option.getOrUndefined))
      }
    })
    return inWorld({ concurrentBatches: 4 })(
      Effect.gen(function* () {
        const { pods } = yield* loopWithPods("10.113.0.0/22", named("r", RECLAIM_AFTER_PODS + 10))
        // A few deletions, then idle for longer than RECLAIM_IDLE_MS: nothing.
        yield* deleteAtOnce(pods.slice(0, 10))
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, 10)
        yield* Effect.sleep(Duration.millis(RECLAIM_IDLE_MS + 1_000))
        expect(reclaims).toEqual([])
        // The rest at once: once the queue has stayed empty, one collection.
        yield* deleteAtOnce(pods.slice(10))
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, RECLAIM_AFTER_PODS + 10)
        yield* eventually(Effect.filterOrFail(Effect.sync(() => reclaims.length), (n) => n === 1, (n) => `${n} reclaims so far`))
        yield* Effect.sleep(Duration.millis(RECLAIM_IDLE_MS + 1_000))
        expect(reclaims).toEqual(["mass deletion"])
      }).pipe(Effect.provide(Logger.add(logger)))
    )
  })

  it.live(`a steady stream of deletions is never paused for a reclaim; the reclaim comes once it stops for ${RECLAIM_IDLE_MS} ms`, () => {
    const reclaims: Array<number> = []
    const logger = Logger.make(({ message }) => {
      if ((Array.isArray(message) ? message : [message]).join(" ") === "returned unused heap memory to the operating system") reclaims.push(Date.now())
    })
    const n = RECLAIM_AFTER_PODS + 50
    return inWorld({ concurrentBatches: 4 })(
      Effect.gen(function* () {
        const { pods } = yield* loopWithPods("10.114.0.0/22", named("s", n))
        // One deletion every 60 ms: each is handled in a few ms, so the loop looks idle at most
        // of its 500 ms checks, but it never is for 2 s. Past RECLAIM_AFTER_PODS, mid-stream.
        for (const p of pods) {
          yield* deleteAtOnce([p])
          yield* Effect.sleep("60 millis")
        }
        const streamEnded = Date.now()
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, n)
        expect(reclaims).toEqual([])
        yield* eventually(Effect.filterOrFail(Effect.sync(() => reclaims.length), (k) => k === 1, (k) => `${k} reclaims so far`))
        expect(reclaims[0]! - streamEnded).toBeGreaterThanOrEqual(RECLAIM_IDLE_MS - 100)
      }).pipe(Effect.provide(Logger.add(logger)))
    )
  }, 30_000)

})

describe("deletion loop: one batch in flight (TestClock)", () => {
  it.effect("the loop tells the Batcher when a batch's pool write landed: deletions made meanwhile wait, then go in one batch", () =>
    inHookedTestWorld()(
      Effect.gen(function* () {
        const hooks = yield* ApiHooks
        const cluster = yield* InMemoryCluster
        const caches = yield* Caches
        const POOL = "10.114.0.0-24"
        yield* createNad(NS, "net1", { range: "10.114.0.0/24" })
        yield* startDeletionLoop()
        const pods: Array<RunningPod> = []
        for (const name of ["a", "b", "c"]) pods.push(yield* startPod(NS, name, [on("net1")]))
        const [a, b, c] = pods as [RunningPod, RunningPod, RunningPod]
        yield* settleUntil(() => Effect.sync(() => caches.pods.byKey.size === 3), "the pods cached")
        const gone = (...names: Array<string>) => () => Effect.sync(() => names.every((n) => Option.isNone(caches.pods.get(`${NS}/${n}`))))
        const held = (names: Array<string>) => Effect.map(podrefsOf(POOL), (refs) => names.filter((n) => refs.includes(`${NS}/${n}`)))
        const touched = (...names: Array<string>) => cluster.calls.filter((x) => names.includes(x.name ?? "") && !(x.verb === "delete" && x.resource === "pods"))
        const entered = (gate: { readonly entered: Effect.Effect<void> }) =>
          Effect.flatMap(Effect.fork(gate.entered), (f) => settleUntil(() => Effect.map(Fiber.poll(f), Option.isSome), "the pool write held"))

        // a's pool write is held: b and c, deleted meanwhile, are not taken by the three idle workers...
        const first = yield* gateOnce((x) => x.verb === "patch" && x.resource === "ippools")
        hooks.before = first.hook
        yield* deletePod(a)
        yield* entered(first)
        cluster.resetCalls()
        yield* deletePod(b)
        yield* deletePod(c)
        yield* settleUntil(gone("b", "c"), "the informer saw b and c deleted")
        yield* settle
        yield* TestClock.adjust(STALLED_BATCH_MS - 1)
        yield* settle
        expect(touched("b", "c")).toEqual([])
        // ...until it ends; then both go in one batch: one pool write for the two.
        yield* first.open
        yield* settleUntil(() => Effect.map(held(["a", "b", "c"]), (h) => h.length === 0), "a, b and c freed")
        expect(cluster.count({ verb: "patch", resource: "ippools" })).toBe(2)
      })
    ))
})

describe("deletion loop: shutdown", () => {
  it.live("interrupting the loop lets the in-flight reconcile finish, and no new work is taken", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const hooks = yield* ApiHooks
        const cluster = yield* InMemoryCluster
        const caches = yield* Caches
        const { loop, pods: [first, second] } = yield* loopWithPods("10.107.0.0/24", ["first", "second"])

        // Hold the release of `first` in flight (the pool write waits on a gate).
        const release = yield* gateOnce((c) => c.verb === "patch" && c.resource === "ippools")
        hooks.before = release.hook
        yield* deletePod(first)
        yield* release.entered

        const stopping = yield* Effect.fork(Fiber.interrupt(loop))
        // Not an assertion on time: the interrupt is delivered on the next scheduler turn, long before this.
        yield* Effect.sleep("50 millis")
        cluster.resetCalls()
        yield* deletePod(second)
        yield* eventually(require(() => Option.isNone(caches.pods.get(`${NS}/second`)), "the informer saw the deletion"))
        yield* Effect.sleep("50 millis")
        // Still draining: the loop has not finished while its work is in flight.
        expect(Option.isNone(yield* Fiber.poll(loop))).toBe(true)
        expect(Option.isNone(yield* Fiber.poll(stopping))).toBe(true)
        expect(yield* podrefsOf("10.107.0.0-24")).toEqual([`${NS}/first`, `${NS}/second`])
        expect(cluster.calls.filter((c) => c.name === "second" && c.verb !== "delete")).toEqual([])
        cluster.resetCalls()

        yield* release.open
        yield* Fiber.join(stopping)
        expect(Exit.isInterrupted(yield* Fiber.await(loop))).toBe(true)
        // `second` was deleted after shutdown began: never taken (no re-check, no write); the
        // in-flight reconcile of `first` ran to its end: its pool write, then its Event.
        expect(cluster.calls.map((c) => `${c.verb} ${c.resource}`)).toEqual(["patch ippools", "create events"])
        expect(yield* podrefsOf("10.107.0.0-24")).toEqual([`${NS}/second`])
        expect(yield* reservationNames).toEqual([firstIP(second)])
        expect(yield* eventsIn(NS)).toEqual([
          expect.objectContaining({ type: "Normal", reason: "IPAddressGarbageCollected", message: gcMessage(firstIP(first), "net1"), name: "first", count: 1 })
        ])
      })
    ).pipe(Effect.provide(memoryWithHooks(BASE))))

  it.live("Events are written after the free without holding the worker back; shutdown waits for them", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const hooks = yield* ApiHooks
        // One worker: were the Events written by it, the second pod would wait for the first's.
        const { loop, pods: [first, second] } = yield* loopWithPods("10.108.0.0/24", ["first", "second"])

        const event = yield* gateOnce((c) => c.verb === "create" && c.resource === "events")
        hooks.before = event.hook
        yield* deletePod(first)
        yield* event.entered
        // The address is free, and counted, while its Event is held.
        expect(yield* podrefsOf("10.108.0.0-24")).toEqual([`${NS}/second`])
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, 1)
        // The only worker is free for the next deletion.
        yield* deletePod(second)
        yield* eventually(Effect.flatMap(podrefsOf("10.108.0.0-24"), (refs) => require(() => refs.length === 0, "second freed")))
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, 2)

        const stopping = yield* Effect.fork(Fiber.interrupt(loop))
        yield* Effect.sleep("50 millis")
        // Shutdown waits for the held Event.
        expect(Option.isNone(yield* Fiber.poll(stopping))).toBe(true)
        yield* event.open
        yield* Fiber.join(stopping)
        const cluster = yield* InMemoryCluster
        expect(cluster.snapshot(R.Events, NS).map((e) => (e as unknown as { involvedObject: { name: string } }).involvedObject.name).sort()).toEqual(["first", "second"])
      })
    ).pipe(Effect.provide(memoryWithHooks({ ...BASE, concurrentBatches: 1 }))))

  it.live("a stalled Event write never delays a pool write: four deletions freed one after another while every Event is held", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const hooks = yield* ApiHooks
        const { pods } = yield* loopWithPods("10.113.0.0/24", named("e", 4))
        // Every Event is held until the gate opens.
        const gate = yield* Deferred.make<void>()
        hooks.before = (c) => (c.verb === "create" && c.resource === "events" ? Deferred.await(gate) : Effect.void)
        const freed = (name: string) => Effect.map(podrefsOf("10.113.0.0-24"), (refs) => !refs.includes(`${NS}/${name}`))
        for (const p of pods) {
          yield* deletePod(p)
          yield* eventually(Effect.flatMap(freed(p.name), (ok) => require(() => ok, `${p.name} freed`)))
        }
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, 4)
        const cluster = yield* InMemoryCluster
        expect(cluster.snapshot(R.Events, NS)).toEqual([])
        yield* Deferred.succeed(gate, undefined)
        expect((yield* eventsIn(NS)).map((e) => e.name).sort()).toEqual(["e0", "e1", "e2", "e3"])
      })
    ).pipe(Effect.provide(memoryWithHooks({ ...BASE, concurrentBatches: 1 }))))

  it.live("with a backlog the next batch gathers while the previous one's Event is still held: one pool write for both", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const hooks = yield* ApiHooks
        const cluster = yield* InMemoryCluster
        const { pods: [first, second, third] } = yield* loopWithPods("10.110.0.0/24", ["first", "second", "third"])

        // first's pool write is held until second and third are queued: its reconcile ends with a backlog.
        const patch = yield* gateOnce((c) => c.verb === "patch" && c.resource === "ippools")
        const event = yield* gateOnce((c) => c.verb === "create" && c.resource === "events")
        hooks.before = (c) => Effect.zipRight(patch.hook(c), event.hook(c))
        yield* deletePod(first)
        yield* patch.entered
        yield* deletePod(second)
        yield* deletePod(third)
        const caches = yield* Caches
        yield* eventually(require(() => Option.isNone(caches.pods.get(`${NS}/third`)), "the informer saw the deletions"))
        yield* Effect.sleep("50 millis") // from the informer into the queue
        cluster.resetCalls()
        yield* patch.open
        yield* event.entered
        // first's Event is held; second and third are freed meanwhile...
        yield* eventually(Effect.flatMap(podrefsOf("10.110.0.0-24"), (refs) => require(() => refs.length === 0, "second and third freed")))
        // ...in one batch: first's write and one pool write for both.
        expect(cluster.count({ verb: "patch", resource: "ippools" })).toBe(2)
        yield* metricReaches("ips_freed_total", { trigger: "deletion" }, 3)
        yield* event.open
      })
    ).pipe(Effect.provide(memoryWithHooks({ ...BASE, concurrentBatches: 1 }))))
})

/** One controller instance (its own config, caches, queue, metrics, elector) over a shared cluster. */
const instance = (state: MemoryClusterState, identity: string) =>
  PluginStore.layer.pipe(
    Layer.provideMerge(withKubeApi(memoryKubeApi)),
    Layer.provideMerge(Layer.mergeAll(ControllerConfig.layerWith({ ...BASE, concurrentBatches: 2, identity }), NadConfigs.layerMemory())),
    Layer.provideMerge(Layer.succeed(InMemoryCluster, state))
  )

/** What main runs: the deletion loop (start-up sweep first) while this instance leads. */
const leaderLoop = Effect.flatMap(LeaderElection, (le) => le.runWhenLeader(runDeletionLoop({ onSynced: (loop) => Effect.asVoid(sweepUntilDone({ dryRun: false, leave: loop.podrefsHeld })) })))

const reportedBy = (state: MemoryClusterState) =>
  state
    .snapshot(R.Events, NS)
    .map((e) => `${(e as { reportingInstance?: string }).reportingInstance} ${(e as unknown as { involvedObject: { name: string } }).involvedObject.name}`)
    .sort()

const failover = (releaseFails: boolean) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(START)
    const state = new MemoryClusterState()
    const a = yield* Layer.build(instance(state, "a"))
    const b = yield* Layer.build(instance(state, "b"))
    const inA = <X, E, R extends Layer.Layer.Success<ReturnType<typeof instance>>>(e: Effect.Effect<X, E, R>) => Effect.provide(e, a)
    const inB = <X, E, R extends Layer.Layer.Success<ReturnType<typeof instance>>>(e: Effect.Effect<X, E, R>) => Effect.provide(e, b)
    const isLeader = (ctx: typeof a) => Effect.provide(Effect.flatMap(LeaderElection, (le) => Effect.map(Stream.runHead(le.changes), Option.getOrThrow)), ctx)
    const freedBy = (ctx: typeof a, trigger: string) => Effect.provide(metric("ips_freed_total", { trigger }), ctx)

    yield* inA(createNad(NS, "net1", { range: "10.108.0.0/24" }))
    const [p1, p2, p3] = [yield* inA(startPod(NS, "p1", [on("net1")])), yield* inA(startPod(NS, "p2", [on("net1")])), yield* inA(startPod(NS, "p3", [on("net1")]))]
    const fa = yield* Effect.forkScoped(inA(leaderLoop))
    yield* settleUntil(() => isLeader(a), "a leads")
    yield* settleUntil(() => Effect.map(freedBy(a, "sweep"), (n) => n === 0), "a's start-up sweep ran")
    const fb = yield* Effect.forkScoped(inB(leaderLoop))
    yield* settleUntil(() => Effect.succeed(state.count({ verb: "get", resource: "leases" }) >= 1), "b polled the lease")
    yield* settle
    expect([yield* isLeader(a), yield* isLeader(b)]).toEqual([true, false])

    // Only the leader frees.
    yield* inA(deletePod(p1!))
    yield* settleUntil(() => Effect.map(freedBy(a, "deletion"), (n) => n === 1), "a frees p1")
    yield* settleUntil(() => Effect.succeed(state.snapshot(R.Events, NS).length === 1), "a's Event recorded")
    yield* TestClock.adjust("3 seconds")
    expect(yield* freedBy(b, "deletion")).toBe(0)
    expect(yield* freedBy(b, "sweep")).toBe(0)
    expect(reportedBy(state)).toEqual(["a p1"])

    // The leader dies; if its release fails, the lease must expire first.
    if (releaseFails) state.injectFault({ verb: "replace", resource: "leases", times: 1 })
    yield* Fiber.interrupt(fa)
    yield* inA(deletePod(p3!)) // nobody leads: only b's start-up sweep can catch this one
    if (releaseFails) {
      yield* TestClock.adjust("10 seconds")
      expect(yield* isLeader(b)).toBe(false)
      expect(yield* inB(podrefsOf("10.108.0.0-24"))).toEqual([`${NS}/p2`, `${NS}/p3`])
      for (let i = 0; i < 20; i++) yield* TestClock.adjust("1 second")
    } else {
      // A released lease (empty holder) is taken at b's next poll: within 2 s × (1 + 1.2).
      for (let i = 0; i < 5; i++) yield* TestClock.adjust("1 second")
    }
    yield* settleUntil(() => isLeader(b), "b leads")
    yield* settleUntil(() => Effect.map(freedBy(b, "sweep"), (n) => n === 1), "b's start-up sweep frees p3")

    yield* inB(deletePod(p2!))
    yield* settleUntil(() => Effect.map(freedBy(b, "deletion"), (n) => n === 1), "b frees p2")
    yield* settleUntil(() => Effect.succeed(state.snapshot(R.Events, NS).length === 3), "b's Events recorded")
    expect(yield* inB(podrefsOf("10.108.0.0-24"))).toEqual([])
    expect(yield* freedBy(a, "deletion")).toBe(1)
    expect(yield* freedBy(a, "sweep")).toBe(0) // its start-up sweep found nothing
    // Events name who freed what: a (deletion), b's start-up sweep (p3), b (deletion).
    expect(reportedBy(state)).toEqual(["a p1", "b p2", "b p3"])
    expect(Option.isNone(yield* Fiber.poll(fb))).toBe(true)
    const lease = state.snapshot(R.Leases, "kube-system")[0]!["spec"] as { holderIdentity: string; leaseTransitions: number }
    expect(lease).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 })
  })

describe("deletion loop: two instances, one leader", () => {
  it.scoped("only the leader frees; when it dies without releasing, the other takes over after the lease expires", () => failover(true))
  it.scoped("a leader that steps down cleanly hands over at the other's next poll", () => failover(false))
})

describe("deletion loop: racing the CNI plugin", () => {
  it.live("an allocator keeps writing the pool while 500 pods are deleted: at rest no live IP freed, no dead IP kept, none shared", () =>
    inWorld({ concurrentBatches: 4 })(
      Effect.gen(function* () {
        const pool = "10.110.0.0-21"
        yield* createNad(NS, "net1", { range: "10.110.0.0/21" })
        yield* startDeletionLoop()
        const old: Array<RunningPod> = []
        for (let i = 0; i < 500; i++) old.push(yield* startPod(NS, `old-${i}`, [on("net1")]))
        yield* cachesCaughtUp

        // The deleter: 500 pods gone without CNI DEL; every 25th comes back under its name (StatefulSet).
        const reborn: Array<RunningPod> = []
        const deleter = Effect.forEach(old, (p, i) =>
          Effect.gen(function* () {
            yield* deletePod(p)
            if (i % 25 === 0) reborn.push(yield* startPod(NS, p.name, [on("net1")]))
            yield* Effect.yieldNow()
          })
        )
        // The allocator: new pods take the lowest free addresses (often ones just freed); some leave properly.
        const fresh: Array<RunningPod> = []
        const allocator = Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) =>
          Effect.gen(function* () {
            const p = yield* startPod(NS, `new-${i}`, [on("net1")])
            if (i % 4 === 3) yield* deletePod(p, { cniDel: true })
            else fresh.push(p)
            yield* Effect.yieldNow()
          })
        )
        yield* Effect.all([deleter, allocator], { concurrency: 2, discard: true })

        yield* eventually(
          Effect.flatMap(restReport(pool), (r) => require(() => r.deadHeld.length === 0 && r.reservationDead.length === 0, `not at rest: ${JSON.stringify(r)}`)),
          "30 seconds"
        )
        const report = yield* restReport(pool)
        expect(report).toMatchObject(CLEAN)
        expect(report.allocations).toBe(reborn.length + fresh.length)
        expect(reborn).toHaveLength(20)
        expect(fresh).toHaveLength(150)
        // Each live pod holds exactly the address its status shows, under its current container id.
        const entries = yield* poolState(pool)
        for (const p of [...reborn, ...fresh]) expect(entries.get(firstIP(p))).toMatchObject({ podref: `${NS}/${p.name}`, id: p.containerId })
        expect(yield* metric("ips_freed_total", { trigger: "deletion" })).toBeGreaterThanOrEqual(480)
      })
    ), 60_000)
})
