/**
 * ApiFlow under TestClock over a scripted KubeApi: the bound per kind of work holds under a burst
 * and one kind's burst takes no other kind's slot; a 429 with Retry-After pauses that kind of
 * work (the refused request and every new one of its kind wait) and nothing else; Events give way
 * to pool writes and reservation requests (one at a time while those are busy); a 5xx with
 * Retry-After is only sent again; the kind of each request.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Stream, TestClock } from "effect"
import { MAX_RETRY_AFTER, kindOf, wrap } from "../../src/services/ApiFlow.ts"
import { DEFAULT_IN_FLIGHT, YIELD_HOLD_MS, YIELDING_IN_FLIGHT } from "../../src/domain/api-flow.ts"
import type { KubeApiShape, KubeObject } from "../../src/services/KubeApi.ts"
import { KubeError } from "../../src/services/KubeError.ts"
import * as Metrics from "../../src/services/Metrics.ts"
import * as R from "../../src/services/resources.ts"

interface Script {
  /** Requests answered so far, as `verb plural name`. */
  readonly log: Array<string>
  /** In flight now and the most ever seen, per resource. */
  readonly inFlight: Map<string, number>
  readonly peak: Map<string, number>
  /** Answers the next request of this `verb plural` with this error instead (consumed once). */
  readonly refuse: Map<string, KubeError>
  /** Requests of this plural wait for the deferred before they answer. */
  readonly hold: Map<string, Deferred.Deferred<void>>
}

const scripted = (): { readonly api: KubeApiShape; readonly script: Script } => {
  const script: Script = { log: [], inFlight: new Map(), peak: new Map(), refuse: new Map(), hold: new Map() }
  const answer = (verb: string, r: R.Resource, name: string): Effect.Effect<KubeObject, KubeError> =>
    Effect.gen(function* () {
      const n = (script.inFlight.get(r.plural) ?? 0) + 1
      script.inFlight.set(r.plural, n)
      script.peak.set(r.plural, Math.max(n, script.peak.get(r.plural) ?? 0))
      const held = script.hold.get(r.plural)
      if (held !== undefined) yield* Deferred.await(held)
      script.inFlight.set(r.plural, (script.inFlight.get(r.plural) ?? 1) - 1)
      const refusal = script.refuse.get(`${verb} ${r.plural}`)
      script.log.push(`${verb} ${r.plural} ${name}${refusal === undefined ? "" : ` -> ${refusal.status}`}`)
      if (refusal !== undefined) {
        script.refuse.delete(`${verb} ${r.plural}`)
        return yield* Effect.fail(refusal)
      }
      return { metadata: { name } }
    })
  const api: KubeApiShape = {
    get: (r, _ns, name) => answer("get", r, name),
    list: (r) => Effect.map(answer("list", r, ""), () => ({ items: [], resourceVersion: "1" })),
    create: (r, _ns, o) => answer("create", r, o.metadata.name),
    replace: (r, _ns, o) => answer("replace", r, o.metadata.name),
    patch: (r, _ns, name) => answer("patch", r, name),
    delete: (r, _ns, name) => Effect.asVoid(answer("delete", r, name)),
    watch: () => Stream.empty
  }
  return { api, script }
}

const refusal = (verb: string, target: string, status: number, retryAfterSeconds?: number) =>
  new KubeError({ reason: status === 429 ? "TooManyRequests" : "Unavailable", verb, target, status, detail: "busy", ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }) })

const flowOver = (api: KubeApiShape) => wrap(api, Duration.seconds(30), Metrics.make())

describe("ApiFlow: requests in flight per kind of work", () => {
  it.effect("a burst of 100 pool patches has at most pool-writes in flight; pod reads meanwhile are not held behind them", () =>
    Effect.gen(function* () {
      const { api, script } = scripted()
      const flow = yield* flowOver(api)
      const patches = yield* Deferred.make<void>()
      script.hold.set("ippools", patches)
      const burst = yield* Effect.fork(
        Effect.forEach(Array.from({ length: 100 }, (_, i) => i), (i) => flow.patch(R.IPPools, "ns", `p${i}`, { type: "merge", body: {} }), { concurrency: "unbounded" })
      )
      yield* TestClock.adjust(Duration.millis(1))
      expect(script.inFlight.get("ippools")).toBe(DEFAULT_IN_FLIGHT["pool-writes"])
      // A pod read goes through while all pool-write slots are taken.
      yield* flow.get(R.Pods, "ns", "web-0")
      expect(script.log).toEqual(["get pods web-0"])
      yield* Deferred.succeed(patches, undefined)
      yield* Fiber.join(burst)
      expect(script.peak.get("ippools")).toBe(DEFAULT_IN_FLIGHT["pool-writes"])
      expect(script.log.filter((l) => l.startsWith("patch"))).toHaveLength(100)
    }))
})

const eventBurst = (flow: KubeApiShape, n: number) =>
  Effect.fork(Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) => flow.create(R.Events, "ns", { metadata: { name: `e${i}` } }), { concurrency: "unbounded" }))

describe("ApiFlow: Events give way to the frees", () => {
  const busyWith: ReadonlyArray<readonly [string, string, (flow: KubeApiShape) => Effect.Effect<unknown, KubeError>]> = [
    ["a pool patch", "ippools", (flow) => flow.patch(R.IPPools, "ns", "pool", { type: "merge", body: {} })],
    ["a reservation delete", "overlappingrangeipreservations", (flow) => flow.delete(R.OverlappingRangeIPReservations, "ns", "10.0.0.1")]
  ]
  for (const [what, plural, request] of busyWith) {
    it.effect(`while ${what} is in flight and for YIELD_HOLD_MS after it, one Event write at a time; then the events bound again`, () =>
      Effect.gen(function* () {
        const { api, script } = scripted()
        const flow = yield* flowOver(api)
        const [write, firstEvents, laterEvents] = [yield* Deferred.make<void>(), yield* Deferred.make<void>(), yield* Deferred.make<void>()]
        script.hold.set(plural, write)
        script.hold.set("events", firstEvents)
        const free = yield* Effect.fork(request(flow))
        yield* TestClock.adjust(Duration.millis(1))
        const burst = yield* eventBurst(flow, 20)
        yield* TestClock.adjust(Duration.millis(1))
        expect(script.inFlight.get("events")).toBe(YIELDING_IN_FLIGHT)
        yield* Deferred.succeed(write, undefined)
        yield* Fiber.join(free)
        yield* TestClock.adjust(Duration.millis(YIELD_HOLD_MS))
        expect(script.peak.get("events")).toBe(YIELDING_IN_FLIGHT)
        // The Event in flight ends; the next finds the frees quiet and lets the bound's worth go.
        script.hold.set("events", laterEvents)
        yield* Deferred.succeed(firstEvents, undefined)
        yield* TestClock.adjust(Duration.millis(1))
        expect(script.inFlight.get("events")).toBe(DEFAULT_IN_FLIGHT.events)
        yield* Deferred.succeed(laterEvents, undefined)
        yield* Fiber.join(burst)
        expect(script.log.filter((l) => l.startsWith("create events"))).toHaveLength(20)
      }))
  }

  it.effect("other kinds of work do not hold Events back, and a pool write never waits for an Event", () =>
    Effect.gen(function* () {
      const { api, script } = scripted()
      const flow = yield* flowOver(api)
      const [reads, events] = [yield* Deferred.make<void>(), yield* Deferred.make<void>()]
      script.hold.set("pods", reads)
      script.hold.set("events", events)
      const read = yield* Effect.fork(flow.get(R.Pods, "ns", "web-0"))
      const burst = yield* eventBurst(flow, 20)
      yield* TestClock.adjust(Duration.millis(1))
      expect(script.inFlight.get("events")).toBe(DEFAULT_IN_FLIGHT.events)
      yield* flow.patch(R.IPPools, "ns", "pool", { type: "merge", body: {} })
      expect(script.log).toEqual(["patch ippools pool"])
      yield* Deferred.succeed(events, undefined)
      yield* Deferred.succeed(reads, undefined)
      yield* Fiber.join(burst)
      yield* Fiber.join(read)
    }))
})

describe("ApiFlow: the server's Retry-After", () => {
  it.effect("a 429 with Retry-After pauses that kind of work until then: the refused request and a new one wait, another kind goes on", () =>
    Effect.gen(function* () {
      const { api, script } = scripted()
      const flow = yield* flowOver(api)
      script.refuse.set("delete overlappingrangeipreservations", refusal("delete", "overlappingrangeipreservations ns/10.0.0.1", 429, 5))
      const first = yield* Effect.fork(flow.delete(R.OverlappingRangeIPReservations, "ns", "10.0.0.1"))
      yield* TestClock.adjust(Duration.seconds(1))
      const second = yield* Effect.fork(flow.delete(R.OverlappingRangeIPReservations, "ns", "10.0.0.2"))
      yield* flow.patch(R.IPPools, "ns", "pool", { type: "merge", body: {} })
      yield* TestClock.adjust(Duration.seconds(3))
      // 4 s in: the pool write went through, the reservations wait.
      expect(script.log).toEqual(["delete overlappingrangeipreservations 10.0.0.1 -> 429", "patch ippools pool"])
      yield* TestClock.adjust(Duration.seconds(1))
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      expect(script.log.slice(2).sort()).toEqual(["delete overlappingrangeipreservations 10.0.0.1", "delete overlappingrangeipreservations 10.0.0.2"])
    }))

  it.effect("a 5xx with Retry-After is sent again after it, pausing nothing; at most MAX_RETRY_AFTER times; no Retry-After, or one longer than the request timeout: the error at once", () =>
    Effect.gen(function* () {
      const { api, script } = scripted()
      const flow = yield* flowOver(api)
      script.refuse.set("get pods", refusal("get", "pods ns/a", 503, 2))
      const a = yield* Effect.fork(flow.get(R.Pods, "ns", "a"))
      yield* TestClock.adjust(Duration.millis(1))
      yield* flow.get(R.Pods, "ns", "b")
      expect(script.log).toEqual(["get pods a -> 503", "get pods b"])
      yield* TestClock.adjust(Duration.seconds(2))
      yield* Fiber.join(a)
      expect(script.log[2]).toBe("get pods a")

      // Always refused: 1 + MAX_RETRY_AFTER attempts, then the error.
      let attempts = 0
      const always: KubeApiShape = { ...api, get: () => Effect.suspend(() => (attempts++, Effect.fail(refusal("get", "pods ns/x", 503, 1)))) }
      const flowAlways = yield* flowOver(always)
      const failing = yield* Effect.fork(Effect.flip(flowAlways.get(R.Pods, "ns", "x")))
      yield* TestClock.adjust(Duration.seconds(10))
      expect((yield* Fiber.join(failing)).status).toBe(503)
      expect(attempts).toBe(1 + MAX_RETRY_AFTER)

      for (const e of [refusal("get", "pods ns/y", 429), refusal("get", "pods ns/y", 429, 31)]) {
        let tries = 0
        const once: KubeApiShape = { ...api, get: () => Effect.suspend(() => (tries++, Effect.fail(e))) }
        expect((yield* Effect.flip((yield* flowOver(once)).get(R.Pods, "ns", "y"))).status).toBe(429)
        expect(tries).toBe(1)
      }
    }))
})

describe("ApiFlow: kinds", () => {
  it("each request is one kind of work", () => {
    expect([
      kindOf("patch", R.IPPools),
      kindOf("delete", R.IPPools),
      kindOf("get", R.IPPools),
      kindOf("delete", R.OverlappingRangeIPReservations),
      kindOf("get", R.OverlappingRangeIPReservations),
      kindOf("get", R.Pods),
      kindOf("list", R.Pods),
      kindOf("create", R.Events),
      kindOf("patch", R.Events),
      kindOf("get", R.Leases),
      kindOf("replace", R.Leases),
      kindOf("list", R.Leases),
      kindOf("get", R.Nodes)
    ]).toEqual(["pool-writes", "pool-writes", "other", "reservations", "reservations", "pod-reads", "lists", "events", "events", "leader-election", "leader-election", "leader-election", "other"])
  })
})
