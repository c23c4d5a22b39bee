/**
 * EventRecorder: writes core/v1 Events as client-go's record.EventRecorder does — same fields, same
 * `<name>.<hex nanos>` names, and its EventCorrelator's de-duplication: an identical event seen again
 * within the aggregation window bumps `count`/`lastTimestamp` on the existing Event.
 *
 * Recording never waits for the API server and never fails the caller (a mass deletion writes one
 * Event per freed IP): events go into a bounded queue that a few writers drain; one recorded again while
 * queued only adds to its count, a full queue drops the new one (events_total{result="dropped"}, and the log).
 */
import { Cause, Clock, Context, Duration, Effect, Fiber, Layer, Option, Stream, SubscriptionRef } from "effect"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type KubeApiShape, type KubeObject } from "./KubeApi.ts"
import { Metrics, type MetricsShape } from "./Metrics.ts"
import { Events, IPPools, apiVersionOf } from "./resources.ts"
import * as WorkQueue from "./WorkQueue.ts"
import { DEFAULT_IN_FLIGHT } from "../domain/api-flow.ts"
import type { EventIntent, EventType, InvolvedObject } from "../domain/events.ts"

export * from "../domain/events.ts"

/** `source.component` and `reportingComponent` of every Event we write. */
export const COMPONENT = "whereabouts-controller"
/** An identical event recorded again within this window updates the existing Event. */
const AGGREGATION_WINDOW_MILLIS = Duration.toMillis(Duration.minutes(10))
/** Distinct events remembered for aggregation (client-go's maxLruCacheEntries). */
export const CACHE_SIZE = 4096

export interface EventRecorderShape {
  /** Queues an event about the object and returns at once (see above); a failed write is logged as a warning. */
  readonly record: (regarding: InvolvedObject, type: EventType, reason: string, message: string) => Effect.Effect<void>
  /** Waits until every event recorded so far is written, failed or dropped (shutdown, one-shot commands, tests). */
  readonly flush: Effect.Effect<void>
  /** Events queued or being written. */
  readonly pending: Effect.Effect<number>
}

export class EventRecorder extends Context.Tag("whereabouts-controller/EventRecorder")<EventRecorder, EventRecorderShape>() {}

/** Distinct Events waiting to be written, at most; more are dropped (and counted). */
export const QUEUE_CAPACITY = 10_000
/** On shutdown, how long queued Events still get to be written. */
const DRAIN_TIMEOUT: Duration.Duration = Duration.seconds(1)
/** A full queue says so in the log at most this often. */
const DROP_LOG_INTERVAL: Duration.Duration = Duration.minutes(1)

/** What we remember of an Event we wrote, to bump it on a repeat. */
interface Seen {
  readonly name: string
  readonly count: number
  readonly lastSeenMillis: number
}

/** metav1.Time: RFC 3339 with whole seconds. */
const rfc3339 = (millis: number): string => new Date(millis).toISOString().replace(/\.\d{3}Z$/, "Z")

/** An LRU map on top of Map's insertion order: a hit moves the key to the back. */
const lru = <V>(capacity: number) => {
  const entries = new Map<string, V>()
  const set = (key: string, v: V): void => {
    entries.delete(key)
    entries.set(key, v)
    if (entries.size > capacity) entries.delete(entries.keys().next().value!)
  }
  const get = (key: string): V | undefined => {
    const v = entries.get(key)
    if (v !== undefined) set(key, v)
    return v
  }
  return { get, set }
}

/** An event waiting to be written; identical ones recorded meanwhile only add to `count`. */
interface Pending extends EventIntent {
  count: number
}

/** Writes one pending event: a count bump on the Event written for its key within the window, else a new Event. */
const eventWriter = (api: KubeApiShape, identity: string, seen: ReturnType<typeof lru<Seen>>) => {
  // Names must be unique; under TestClock (or a coarse clock) two creates share a nanosecond.
  let lastNanos = -1n
  return (key: string, p: Pending) =>
    Effect.gen(function*() {
      const nanos = yield* Clock.currentTimeNanos
      const nowMillis = Number(nanos / 1_000_000n)
      const now = rfc3339(nowMillis)
      const previous = seen.get(key)
      const { regarding } = p
      if (previous !== undefined && nowMillis - previous.lastSeenMillis < AGGREGATION_WINDOW_MILLIS) {
        const count = previous.count + p.count
        const patched = yield* api.patch(Events, regarding.namespace, previous.name, { type: "merge", body: { count, lastTimestamp: now } }).pipe(
          Effect.as(true),
          // Expired (events live ~1 h) or deleted: start a new Event below.
          Effect.catchIf((e) => e._tag === "KubeError" && e.reason === "NotFound", () => Effect.succeed(false))
        )
        if (patched) {
          seen.set(key, { name: previous.name, count, lastSeenMillis: nowMillis })
          return
        }
      }

      const unique = nanos > lastNanos ? nanos : lastNanos + 1n
      lastNanos = unique
      const name = `${regarding.name}.${unique.toString(16).padStart(16, "0")}`
      yield* api.create(Events, regarding.namespace, eventObject(name, p, now, identity))
      seen.set(key, { name, count: p.count, lastSeenMillis: nowMillis })
    })
}

/** Counts a dropped Event, and says so in the log at most once per DROP_LOG_INTERVAL. */
const dropReporter = (metrics: MetricsShape) => {
  let droppedSinceLog = 0
  let lastDropLog = Number.NEGATIVE_INFINITY
  return (p: { readonly regarding: InvolvedObject; readonly reason: string }) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      droppedSinceLog++
      if (now - lastDropLog < Duration.toMillis(DROP_LOG_INTERVAL)) return metrics.events("dropped", 1)
      const n = droppedSinceLog
      droppedSinceLog = 0
      lastDropLog = now
      return Effect.zipRight(
        metrics.events("dropped", 1),
        Effect.logWarning(`event queue full (${QUEUE_CAPACITY}): ${n} Event(s) dropped, the latest ${p.reason} on ${p.regarding.kind} ${p.regarding.namespace}/${p.regarding.name}`)
      )
    })
}

/** A recorder over the KubeApi in context; its writers live as long as the layer. */
export const layer: Layer.Layer<EventRecorder, never, KubeApi | ControllerConfig | Metrics> = Layer.scoped(
  EventRecorder,
  Effect.gen(function*() {
    const api = yield* KubeApi
    const config = yield* ControllerConfig
    const metrics = yield* Metrics
    // Keyed as client-go's workqueue: a key waits once, and one being written is handed out again
    // only after its write, so a repeat recorded meanwhile becomes a count bump, not a second Event.
    const queue = yield* WorkQueue.make<void>()
    const pending = new Map<string, Pending>()
    // Queued plus being written: flush waits for 0.
    const outstanding = yield* SubscriptionRef.make(0)
    const write = eventWriter(api, config.identity, lru<Seen>(CACHE_SIZE))

    const writeOne = (key: string, p: Pending) =>
      write(key, p).pipe(
        Effect.zipRight(metrics.events("written", 1)),
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
          const error = Cause.squash(cause)
          const detail = error instanceof Error ? error.message : String(error)
          const object = `${p.regarding.kind} ${p.regarding.namespace}/${p.regarding.name}`
          return Effect.zipRight(
            metrics.events("failed", 1),
            Effect.logWarning(`failed to record ${p.type} event ${p.reason} on ${object}: ${detail}`).pipe(Effect.annotateLogs({ object, reason: p.reason, error: detail }))
          )
        }),
        Effect.ensuring(Effect.zipRight(SubscriptionRef.update(outstanding, (n) => n - 1), queue.done(key)))
      )

    // One Event per writer at a time. The queue is never shut down: its writers are interrupted instead.
    const writer = Effect.forever(
      Effect.flatMap(Effect.map(queue.takeBatch(1), (batch) => Option.getOrThrow(batch)[0]!.key), (key) =>
        Effect.suspend(() => {
          const p = pending.get(key)!
          pending.delete(key)
          return Effect.zipRight(metrics.eventQueue(pending.size), writeOne(key, p))
        })
      )
    )
    // Forked while the layer is built (uninterruptible): made interruptible, or shutdown could not stop them.
    const fibers = yield* Effect.forEach(Array.from({ length: DEFAULT_IN_FLIGHT.events }), () => Effect.forkDaemon(Effect.interruptible(writer)))
    const dropped = dropReporter(metrics)

    const record: EventRecorderShape["record"] = (regarding, type, reason, message) =>
      Effect.suspend(() => {
        const key = JSON.stringify([regarding.uid, regarding.kind, regarding.namespace, regarding.name, type, reason, message])
        const queued = pending.get(key)
        if (queued !== undefined) {
          queued.count++
          return metrics.events("queued", 1)
        }
        if (pending.size >= QUEUE_CAPACITY) return dropped({ regarding, reason })
        pending.set(key, { regarding, type, reason, message, count: 1 })
        return Effect.all([SubscriptionRef.update(outstanding, (n) => n + 1), queue.add(key, undefined), metrics.events("queued", 1), metrics.eventQueue(pending.size)], { discard: true })
      })

    const flush = Effect.asVoid(Stream.runHead(Stream.filter(outstanding.changes, (n) => n <= 0)))

    // On shutdown: what is queued gets DRAIN_TIMEOUT to be written; the rest is counted as dropped.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        // A finalizer runs uninterruptibly: the wait is made interruptible, or the timeout could not end it.
        yield* Effect.timeout(Effect.interruptible(flush), DRAIN_TIMEOUT).pipe(Effect.ignore)
        // Queued or in flight: none of them is known to be written.
        const left = yield* SubscriptionRef.get(outstanding)
        yield* Effect.forEach(fibers, Fiber.interrupt, { discard: true })
        if (left > 0) {
          yield* metrics.events("dropped", left)
          yield* Effect.logWarning(`${left} Event(s) not written before shutdown`)
        }
      })
    )

    return { record, flush, pending: SubscriptionRef.get(outstanding) }
  })
)

/** The Event object client-go's recorder writes. */
const eventObject = (name: string, p: Pending, now: string, identity: string): KubeObject => {
  const { kind, namespace, name: objectName, uid } = p.regarding
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name, namespace },
    involvedObject: { apiVersion: kind === "IPPool" ? apiVersionOf(IPPools) : "v1", kind, namespace, name: objectName, uid },
    reason: p.reason,
    message: p.message,
    type: p.type,
    source: { component: COMPONENT },
    firstTimestamp: now,
    lastTimestamp: now,
    count: p.count,
    reportingComponent: COMPONENT,
    reportingInstance: identity
  }
}
