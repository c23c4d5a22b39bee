/**
 * How requests flow to the API server. No client-side rate by default (the server protects itself
 * with API Priority and Fairness); the controller's back-pressure is
 *  - a fixed number of requests in flight per kind of work (DEFAULT_IN_FLIGHT): a burst of one kind
 *    queues behind its own bound and never takes the others' slots, so Events never hold back a pool
 *    write and a mass deletion never starves the Lease renewal;
 *  - Events give way to the frees (YIELDS_TO), so the server's CPU goes to the addresses first;
 *  - the server's answer: a 429 with Retry-After pauses that kind of work until then and the refused
 *    request is sent again after it; a 5xx with Retry-After is sent again after it, without a pause.
 *    At most MAX_RETRY_AFTER times, and never for a wait longer than the request timeout: then the
 *    error goes to the caller, whose own retry (the work queue's backoff) takes over.
 * Watches are long-lived and pass unbounded. `--api-qps` stays as an opt-in cap (KubeApiLive).
 * Beneath the flow, `instrument` counts every attempt by verb, resource and HTTP code, and times all but watches.
 */
import { Clock, Duration, Effect, Layer, Stream } from "effect"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type KubeApiShape, around } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import { Metrics, type MetricsShape } from "./Metrics.ts"
import * as R from "./resources.ts"
import { DEFAULT_IN_FLIGHT, FLOW_KINDS, type FlowKind, YIELD_HOLD_MS, YIELDING_IN_FLIGHT, YIELDS_TO } from "../domain/api-flow.ts"

/** Retries of one request the API server asked for with Retry-After (client-go allows 10). */
export const MAX_RETRY_AFTER = 3

/** The kind of work a request is. */
export const kindOf = (verb: string, r: R.Resource): FlowKind => {
  const is = (x: R.Resource) => r.plural === x.plural && r.group === x.group
  if (is(R.Leases)) return "leader-election"
  if (verb === "list") return "lists"
  if (is(R.Events)) return "events"
  if (is(R.IPPools)) return verb === "get" ? "other" : "pool-writes"
  if (is(R.OverlappingRangeIPReservations)) return "reservations"
  if (is(R.Pods)) return "pod-reads"
  return "other"
}

/** Sleeps until the clock reads `until`, again if a later pause came meanwhile. */
const waitFor = (until: () => number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => (until() <= now ? Effect.void : Effect.zipRight(Effect.sleep(Duration.millis(until() - now)), Effect.suspend(() => waitFor(until)))))

/**
 * `api` with the flow control above, in-flight counts and pauses in `metrics` (pauses in the log too);
 * no Retry-After longer than `requestTimeout` is honoured (a request would not live that long).
 */
export const wrap = (api: KubeApiShape, requestTimeout: Duration.DurationInput, metrics: MetricsShape): Effect.Effect<KubeApiShape> =>
  Effect.gen(function* () {
    const longest = Duration.toMillis(Duration.decode(requestTimeout))
    const lanes = new Map<FlowKind, { readonly permits: Effect.Semaphore; pausedUntil: number; inFlight: number; lastDone: number }>()
    for (const kind of FLOW_KINDS) lanes.set(kind, { permits: yield* Effect.makeSemaphore(DEFAULT_IN_FLIGHT[kind]), pausedUntil: 0, inFlight: 0, lastDone: Number.NEGATIVE_INFINITY })
    const busy = (kind: FlowKind, now: number): boolean => {
      const lane = lanes.get(kind)!
      return lane.inFlight > 0 || now - lane.lastDone < YIELD_HOLD_MS
    }
    // A yielding kind's bound is set again by each of its requests as it goes: one waiting behind
    // it goes when it is done and finds out whether the others are still busy.
    const giveWay = (kind: FlowKind): Effect.Effect<void> => {
      const yielding = YIELDS_TO[kind]
      if (yielding === undefined) return Effect.void
      const bound = DEFAULT_IN_FLIGHT[kind]
      return Effect.flatMap(Clock.currentTimeMillis, (now) => lanes.get(kind)!.permits.resize(yielding.some((k) => busy(k, now)) ? Math.min(YIELDING_IN_FLIGHT, bound) : bound))
    }

    const inLane = <A>(kind: FlowKind, effect: Effect.Effect<A, KubeError>): Effect.Effect<A, KubeError> => {
      const lane = lanes.get(kind)!
      const counted = Effect.acquireUseRelease(
        Effect.suspend(() => metrics.apiInFlight(kind, ++lane.inFlight)),
        () => effect,
        () =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            lane.lastDone = now
            return metrics.apiInFlight(kind, --lane.inFlight)
          })
      )
      return Effect.zipRight(waitFor(() => lane.pausedUntil), lane.permits.withPermits(1)(Effect.zipRight(giveWay(kind), counted)))
    }

    const flow = <A>(kind: FlowKind, request: Effect.Effect<A, KubeError>): Effect.Effect<A, KubeError> =>
      Effect.gen(function* () {
        for (let retries = 0; ; retries++) {
          const result = yield* Effect.either(inLane(kind, request))
          if (result._tag === "Right") return result.right
          const e = result.left
          const wait = e.retryAfterSeconds
          if (wait === undefined || retries >= MAX_RETRY_AFTER || wait * 1000 > longest) return yield* Effect.fail(e)
          if (e.status === 429) {
            const lane = lanes.get(kind)!
            const until = (yield* Clock.currentTimeMillis) + wait * 1000
            if (until > lane.pausedUntil) {
              lane.pausedUntil = until
              yield* metrics.apiPaused(kind, wait)
              yield* Effect.logWarning("the API server asked to slow down: this kind of request waits").pipe(
                Effect.annotateLogs({ kind, seconds: wait, request: `${e.verb} ${e.target}`, detail: e.detail })
              )
            }
            // The next attempt waits at the lane's entrance, with every other request of its kind.
          } else {
            yield* Effect.logDebug(`${e.verb} ${e.target}: HTTP ${e.status}, retrying after ${wait} s as the API server asked`)
            yield* Effect.sleep(Duration.seconds(wait))
          }
        }
      })

    // Watches pass unbounded: they are long-lived.
    return around(api, ({ verb, resource }, request) => flow(kindOf(verb, resource), request))
  })

/** `inner` under the flow control, reporting to Metrics. */
export const flowControl = <E, R>(inner: Layer.Layer<KubeApi, E, R>): Layer.Layer<KubeApi, E, R | ControllerConfig | Metrics> =>
  Layer.effect(
    KubeApi,
    Effect.gen(function* () {
      const config = yield* ControllerConfig
      return yield* wrap(yield* KubeApi, config.requestTimeout, yield* Metrics)
    })
  ).pipe(Layer.provide(inner))

const code = (e: KubeError): string => (e.status === undefined ? e.reason : String(e.status))

const counted = (api: KubeApiShape, metrics: MetricsShape): KubeApiShape =>
  around(
    api,
    ({ verb, resource }, effect) =>
      Effect.flatMap(Clock.currentTimeMillis, (start) => {
        const count = (code: string) => Effect.flatMap(Clock.currentTimeMillis, (now) => metrics.apiRequest(verb, resource.plural, code, (now - start) / 1000))
        return Effect.tapBoth(effect, { onSuccess: () => count(verb === "create" ? "201" : "200"), onFailure: (e) => count(code(e)) })
      }),
    (r, events) =>
      Stream.unwrap(metrics.apiRequest("watch", r.plural, "200").pipe(Effect.as(events.pipe(Stream.tapError((e) => metrics.apiRequest("watch", r.plural, code(e)))))))
  )

/** `inner`, with every request counted in Metrics. */
export const instrument = <E, R>(inner: Layer.Layer<KubeApi, E, R>): Layer.Layer<KubeApi, E, R | Metrics> =>
  Layer.effect(KubeApi, Effect.zipWith(KubeApi, Metrics, counted)).pipe(Layer.provide(inner))
