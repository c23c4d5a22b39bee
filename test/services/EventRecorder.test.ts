import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Fiber, Layer, Logger, Option, Scope, TestClock } from "effect"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import * as EventRecorder from "../../src/services/EventRecorder.ts"
import { InMemoryCluster, layerMemory } from "../../src/testing/InMemoryCluster.ts"
import type { KubeObject } from "../../src/services/KubeApi.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import { rateLimiter } from "../../src/services/TokenBucket.ts"
import * as Metrics from "../../src/services/Metrics.ts"
import * as R from "../../src/services/resources.ts"
import { valueIn } from "../../src/testing/prom.ts"

const START = Date.parse("2026-11-03T10:00:00Z")
const pod: EventRecorder.InvolvedObject = { kind: "Pod", namespace: "team-a", name: "web-0", uid: "0b7f3c1e-uid" }

const env = Layer.provideMerge(
  EventRecorder.layer,
  Layer.mergeAll(Layer.provideMerge(layerMemory, InMemoryCluster.layer()), ControllerConfig.layerWith({ identity: "wc-7d9f-abcde" }), Metrics.layer)
)

/** Runs a test body at START on TestClock, with a fresh cluster and recorder. */
const run = <A, E>(
  body: Effect.Effect<A, E, EventRecorder.EventRecorder | InMemoryCluster | KubeApi | Metrics.Metrics>,
  // Outside the recorder, as the program's logger is: its writers log through it.
  logger: Layer.Layer<never> = Layer.empty
) => Effect.zipRight(TestClock.setTime(START), body).pipe(Effect.provide(env), Effect.provide(logger))

const events = Effect.map(InMemoryCluster, (c) => c.snapshot(R.Events, pod.namespace))
/** Records, then waits until the recorder has written (or given up on) everything queued. */
const record = (reason: string, message: string, type: EventRecorder.EventType = "Normal", regarding = pod) =>
  Effect.flatMap(EventRecorder.EventRecorder, (r) => Effect.zipRight(r.record(regarding, type, reason, message), r.flush))
/** Records without waiting: what the controller does. */
const enqueue = (reason: string, message: string, regarding = pod) => Effect.flatMap(EventRecorder.EventRecorder, (r) => r.record(regarding, "Normal", reason, message))
const flush = Effect.flatMap(EventRecorder.EventRecorder, (r) => r.flush)
const expectedName = (millis: number) => `${pod.name}.${(BigInt(millis) * 1_000_000n).toString(16)}`

/** Collects warning lines; @effect/vitest removes the default logger, so this is the only one. */
const captureWarnings = () => {
  const lines: Array<{ message: string; annotations: Record<string, unknown> }> = []
  const logger = Logger.make(({ logLevel, message, annotations }) => {
    if (logLevel._tag !== "Warning") return
    lines.push({
      message: (Array.isArray(message) ? message : [message]).map(String).join(" "),
      annotations: Object.fromEntries(annotations)
    })
  })
  return { lines, layer: Logger.add(logger) }
}

describe("EventRecorder: messages", () => {
  it("renders whereabouts' exact strings", () => {
    expect(EventRecorder.garbageCollectedMessage("10.0.0.1", "net1")).toBe("successful cleanup of IP address [10.0.0.1] from network net1")
    expect(EventRecorder.gcFailedMessage("team-a", "web-0")).toBe("failed to garbage collect addresses for pod team-a/web-0")
    expect(EventRecorder.REASON_GARBAGE_COLLECTED).toBe("IPAddressGarbageCollected")
    expect(EventRecorder.REASON_GC_FAILED).toBe("IPAddressGarbageCollectionFailed")
    expect([
      EventRecorder.REASON_NAD_MISSING,
      EventRecorder.REASON_BAD_CONFIG,
      EventRecorder.REASON_BAD_ANNOTATION,
      EventRecorder.REASON_POOL_NEARLY_FULL
    ]).toEqual(["NetworkAttachmentDefinitionNotFound", "InvalidIPAMConfig", "InvalidNetworkAnnotation", "IPPoolNearlyFull"])
  })
})

describe("EventRecorder: writing core/v1 Events", () => {
  it.effect("creates an Event with client-go's fields", () =>
    run(
      Effect.gen(function*() {
        yield* record(EventRecorder.REASON_GARBAGE_COLLECTED, EventRecorder.garbageCollectedMessage("10.0.0.1", "net1"))
        const all = yield* events
        expect(all).toHaveLength(1)
        const event = all[0]!
        expect(event.metadata.name).toBe(expectedName(START))
        expect(event.metadata.name).toMatch(/^web-0\.[0-9a-f]{16}$/)
        expect(event.metadata.namespace).toBe("team-a")
        expect(event).toMatchObject({
          apiVersion: "v1",
          kind: "Event",
          involvedObject: { apiVersion: "v1", kind: "Pod", namespace: "team-a", name: "web-0", uid: "0b7f3c1e-uid" },
          type: "Normal",
          reason: "IPAddressGarbageCollected",
          message: "successful cleanup of IP address [10.0.0.1] from network net1",
          source: { component: "whereabouts-controller" },
          reportingComponent: "whereabouts-controller",
          reportingInstance: "wc-7d9f-abcde",
          firstTimestamp: "2026-11-03T10:00:00Z",
          lastTimestamp: "2026-11-03T10:00:00Z",
          count: 1
        })
      })
    ))

  it.effect("a repeat within the window bumps count and lastTimestamp instead of creating another Event", () =>
    run(
      Effect.gen(function*() {
        const cluster = yield* InMemoryCluster
        const message = EventRecorder.gcFailedMessage("team-a", "web-0")
        yield* record(EventRecorder.REASON_GC_FAILED, message, "Warning")
        yield* TestClock.adjust("30 seconds")
        yield* record(EventRecorder.REASON_GC_FAILED, message, "Warning")
        yield* TestClock.adjust("9 minutes")
        yield* record(EventRecorder.REASON_GC_FAILED, message, "Warning")
        const all = yield* events
        expect(all).toHaveLength(1)
        expect(all[0]).toMatchObject({
          metadata: { name: expectedName(START) },
          type: "Warning",
          message: "failed to garbage collect addresses for pod team-a/web-0",
          count: 3,
          firstTimestamp: "2026-11-03T10:00:00Z",
          lastTimestamp: "2026-11-03T10:09:30Z"
        })
        expect(cluster.count({ verb: "create", resource: "events" })).toBe(1)
        expect(cluster.count({ verb: "patch", resource: "events" })).toBe(2)
      })
    ))

  it.effect("a different message, reason, type or object is a different Event", () =>
    run(
      Effect.gen(function*() {
        yield* record(EventRecorder.REASON_GARBAGE_COLLECTED, EventRecorder.garbageCollectedMessage("10.0.0.1", "net1"))
        yield* record(EventRecorder.REASON_GARBAGE_COLLECTED, EventRecorder.garbageCollectedMessage("10.0.0.2", "net1"))
        yield* record(EventRecorder.REASON_GC_FAILED, EventRecorder.garbageCollectedMessage("10.0.0.2", "net1"))
        yield* record(EventRecorder.REASON_GC_FAILED, EventRecorder.garbageCollectedMessage("10.0.0.2", "net1"), "Warning")
        yield* record(EventRecorder.REASON_GC_FAILED, EventRecorder.garbageCollectedMessage("10.0.0.2", "net1"), "Warning", {
          ...pod,
          uid: "new-incarnation"
        })
        const all = yield* events
        expect(all).toHaveLength(5)
        expect(all.map((e) => e["count"])).toEqual([1, 1, 1, 1, 1])
        // Recorded in the same instant, yet every name is unique.
        expect(new Set(all.map((e) => e.metadata.name)).size).toBe(5)
        expect(all.map((e) => e["message"])).toContain("successful cleanup of IP address [10.0.0.2] from network net1")
      })
    ))

  it.effect("an Event deleted meanwhile (expired) is created anew", () =>
    run(
      Effect.gen(function*() {
        const api = yield* KubeApi
        const message = EventRecorder.garbageCollectedMessage("10.0.0.1", "net1")
        yield* record(EventRecorder.REASON_GARBAGE_COLLECTED, message)
        const first = (yield* events)[0]!
        yield* api.delete(R.Events, pod.namespace, first.metadata.name)
        yield* TestClock.adjust("1 minute")
        yield* record(EventRecorder.REASON_GARBAGE_COLLECTED, message)
        const all = yield* events
        expect(all).toHaveLength(1)
        expect(all[0]!.metadata.name).toBe(expectedName(START + 60_000))
        expect(all[0]).toMatchObject({ count: 1, firstTimestamp: "2026-11-03T10:01:00Z", lastTimestamp: "2026-11-03T10:01:00Z" })
        // And the new one is the one repeats now bump.
        yield* record(EventRecorder.REASON_GARBAGE_COLLECTED, message)
        expect((yield* events).map((e) => e["count"])).toEqual([2])
      })
    ))

  it.effect("a repeat after the aggregation window starts a new Event", () =>
    run(
      Effect.gen(function*() {
        const message = EventRecorder.garbageCollectedMessage("10.0.0.1", "net1")
        yield* record(EventRecorder.REASON_GARBAGE_COLLECTED, message)
        yield* TestClock.adjust("10 minutes")
        yield* record(EventRecorder.REASON_GARBAGE_COLLECTED, message)
        const all = yield* events
        expect(all.map((e) => [e.metadata.name, e["count"]])).toEqual([
          [expectedName(START), 1],
          [expectedName(START + 600_000), 1]
        ])
      })
    ))

  it.effect("concurrent identical records make one Event, counted", () =>
    run(
      Effect.gen(function*() {
        const message = EventRecorder.garbageCollectedMessage("10.0.0.1", "net1")
        yield* Effect.all(Array.from({ length: 5 }, () => record(EventRecorder.REASON_GARBAGE_COLLECTED, message)), {
          concurrency: "unbounded"
        })
        expect((yield* events).map((e) => e["count"])).toEqual([5])
      })
    ))

  it.effect("the aggregation cache is bounded: an evicted key starts a new Event", () =>
    run(
      Effect.gen(function*() {
        yield* record("A", "a")
        yield* record("B", "b")
        yield* record("A", "a") // A is now the most recently used
        for (let i = 0; i < EventRecorder.CACHE_SIZE - 1; i++) yield* enqueue("C", `c${i}`) // the last of them evicts B
        yield* flush
        yield* record("A", "a")
        yield* record("B", "b")
        const all = yield* events
        const counts = all.map((e) => `${String(e["reason"])}=${String(e["count"])}`).filter((c) => c !== "C=1").sort()
        expect(counts).toEqual(["A=3", "B=1", "B=1"])
        expect(all).toHaveLength(EventRecorder.CACHE_SIZE + 2)
      })
    ))
})

describe("EventRecorder: failures never reach the caller", () => {
  it.effect("an API failure on create is logged with object, reason and error", () => {
    const warnings = captureWarnings()
    return run(
      Effect.gen(function*() {
        const cluster = yield* InMemoryCluster
        cluster.injectFault({ verb: "create", resource: "events" })
        yield* record(EventRecorder.REASON_GC_FAILED, EventRecorder.gcFailedMessage("team-a", "web-0"), "Warning")
        expect(yield* events).toHaveLength(0)
        expect(warnings.lines).toHaveLength(1)
        const line = warnings.lines[0]!
        expect(line.message).toContain("Pod team-a/web-0")
        expect(line.message).toContain("IPAddressGarbageCollectionFailed")
        expect(line.message).toContain("Unavailable")
        expect(line.annotations).toMatchObject({ object: "Pod team-a/web-0", reason: "IPAddressGarbageCollectionFailed" })
        // Nothing was remembered: the next one creates the Event.
        yield* record(EventRecorder.REASON_GC_FAILED, EventRecorder.gcFailedMessage("team-a", "web-0"), "Warning")
        expect((yield* events).map((e) => e["count"])).toEqual([1])
      }),
      warnings.layer
    )
  })

  it.effect("a failed count bump is logged and retried with the right count next time", () => {
    const warnings = captureWarnings()
    return run(
      Effect.gen(function*() {
        const cluster = yield* InMemoryCluster
        yield* record("R", "m")
        cluster.injectFault({ verb: "patch", resource: "events", reason: "TooManyRequests" })
        yield* record("R", "m")
        expect((yield* events).map((e) => e["count"])).toEqual([1])
        expect(warnings.lines.map((l) => l.annotations["error"])).toEqual([expect.stringContaining("TooManyRequests")])
        yield* record("R", "m")
        expect((yield* events).map((e) => e["count"])).toEqual([2])
      }),
      warnings.layer
    )
  })

  it.effect("Events queued behind the client rate limiter longer than the request timeout are all written", () =>
    Effect.gen(function*() {
      // 100 distinct Events through QPS 1 / burst 1: the last waits ~99 s for its token, far past
      // the 30 s request timeout, which only counts once a request is sent.
      const limited = Layer.effect(
        KubeApi,
        Effect.gen(function*() {
          const api = yield* KubeApi
          const limit = yield* rateLimiter(1, 1)
          return { ...api, create: (r, ns, o) => limit(api.create(r, ns, o)), patch: (r, ns, n, p) => limit(api.patch(r, ns, n, p)) } satisfies typeof api
        })
      )
      const layers = Layer.provideMerge(
        EventRecorder.layer,
        Layer.mergeAll(
          Layer.provideMerge(limited, Layer.provideMerge(layerMemory, InMemoryCluster.layer())),
          ControllerConfig.layerWith({ identity: "wc-7d9f-abcde" }),
          Metrics.layer
        )
      )
      yield* Effect.scoped(
        Effect.gen(function*() {
          yield* TestClock.setTime(START)
          const all = yield* Effect.fork(Effect.forEach(Array.from({ length: 100 }, (_, i) => i), (i) => record("R", `m${i}`), { concurrency: "unbounded", discard: true }))
          yield* TestClock.adjust(Duration.seconds(100))
          yield* Fiber.join(all)
          expect((yield* events).map((e: KubeObject) => e["message"]).sort()).toEqual(Array.from({ length: 100 }, (_, i) => `m${i}`).sort())
        }).pipe(Effect.provide(layers))
      )
    }))

  it.effect("a stalled API call gives up after the request timeout", () =>
    run(
      Effect.gen(function*() {
        const cluster = yield* InMemoryCluster
        cluster.injectFault({ verb: "create", resource: "events", reason: "stall" })
        const fiber = yield* Effect.fork(record("R", "m"))
        yield* TestClock.adjust(Duration.seconds(30))
        yield* Fiber.join(fiber)
        // The recorder is not wedged: the next event goes through.
        yield* record("R", "m")
        expect((yield* events).map((e: KubeObject) => e["count"])).toEqual([1])
      })
    ))
})

describe("EventRecorder: the queue", () => {
  it.effect("record returns at once while writes stall; an event recorded again while queued is one write with its count", () =>
    run(
      Effect.gen(function*() {
        const cluster = yield* InMemoryCluster
        const metrics = yield* Metrics.Metrics
        cluster.injectFault({ verb: "create", resource: "events", reason: "stall", times: 8 })
        // Eight writers (--max-in-flight events=8) take eight events and stall on them.
        for (let i = 0; i < 8; i++) yield* Effect.zipRight(enqueue("R", `stalled ${i}`), Effect.yieldNow())
        for (let i = 0; i < 3; i++) yield* enqueue("R", "queued behind them")
        expect(yield* events).toEqual([])
        expect(yield* valueIn(metrics, "event_queue_depth")).toBe(1)
        // The stalled writes time out (30 s); the queued one is written once, counted 3.
        yield* TestClock.adjust(Duration.seconds(31))
        yield* flush
        expect((yield* events).map((e) => [e["message"], e["count"]])).toEqual([["queued behind them", 3]])
        expect(yield* valueIn(metrics, "events_total", { result: "queued" })).toBe(11)
        expect(yield* valueIn(metrics, "events_total", { result: "failed" })).toBe(8)
        expect(yield* valueIn(metrics, "events_total", { result: "written" })).toBe(1)
      })
    ))

  it.effect("an event recorded again while its first write is in flight is a count bump, not a second Event", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(START)
      yield* enqueue("R", "m")
      // A writer has taken it and waits on the API server's latency.
      yield* TestClock.adjust(Duration.millis(100))
      yield* enqueue("R", "m")
      yield* TestClock.adjust(Duration.seconds(2))
      yield* flush
      expect((yield* events).map((e) => e["count"])).toEqual([2])
    }).pipe(
      Effect.provide(
        Layer.provideMerge(
          EventRecorder.layer,
          Layer.mergeAll(Layer.provideMerge(layerMemory, InMemoryCluster.layer({ latency: "1 second" })), ControllerConfig.layerWith({ identity: "wc-7d9f-abcde" }), Metrics.layer)
        )
      )
    ))

  it.effect("a full queue drops new events, counts each and says so once", () => {
    const warnings = captureWarnings()
    return run(
      Effect.gen(function*() {
        const cluster = yield* InMemoryCluster
        const metrics = yield* Metrics.Metrics
        cluster.injectFault({ verb: "create", resource: "events", reason: "stall", times: 8 })
        for (let i = 0; i < 8; i++) yield* Effect.zipRight(enqueue("R", `stalled ${i}`), Effect.yieldNow())
        for (let i = 0; i < EventRecorder.QUEUE_CAPACITY + 3; i++) yield* enqueue("R", `m${i}`)
        expect(yield* valueIn(metrics, "events_total", { result: "dropped" })).toBe(3)
        expect(warnings.lines.map((l) => l.message)).toEqual([`event queue full (${EventRecorder.QUEUE_CAPACITY}): 1 Event(s) dropped, the latest R on Pod team-a/web-0`])
        yield* TestClock.adjust(Duration.seconds(31))
        yield* flush
        expect((yield* events).map((e) => e["message"]).sort()).toEqual(Array.from({ length: EventRecorder.QUEUE_CAPACITY }, (_, i) => `m${i}`).sort())
      }).pipe(Effect.provide(warnings.layer))
    )
  })

  it.effect("on shutdown what is still queued after the drain timeout is counted as dropped", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(START)
      const scope = yield* Scope.make()
      const recorderEnv = yield* Layer.buildWithScope(env, scope)
      const metrics = Context.get(recorderEnv, Metrics.Metrics)
      const cluster = Context.get(recorderEnv, InMemoryCluster)
      const recorder = Context.get(recorderEnv, EventRecorder.EventRecorder)
      cluster.injectFault({ verb: "create", resource: "events", reason: "stall", times: 100 })
      for (let i = 0; i < 10; i++) yield* recorder.record(pod, "Normal", "R", `m${i}`)
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      // The clock moves until the scope is closed: the drain gives up after its 1 s.
      while (Option.isNone(yield* Fiber.poll(closing))) yield* TestClock.adjust(Duration.millis(100))
      expect(yield* TestClock.currentTimeMillis).toBeLessThan(START + 30_000)
      expect(yield* valueIn(metrics, "events_total", { result: "dropped" })).toBe(10)
    }))
})
