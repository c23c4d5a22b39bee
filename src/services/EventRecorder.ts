/**
 * EventRecorder: writes core/v1 Events the way client-go's record.EventRecorder does — same
 * fields, same `<name>.<hex nanos>` names, and its EventCorrelator's de-duplication: an identical
 * event seen again within the aggregation window bumps `count`/`lastTimestamp` on the existing
 * Event instead of creating another. Recording is best effort: it never fails the caller.
 *
 * Writes of one event (same object, type, reason and message) are serialised, so two workers
 * recording the same event at once produce one Event with count 2, not two Events. Distinct events
 * are written in parallel: a single global lock would make every worker wait behind every other
 * worker's Events (a mass deletion writes one per freed IP).
 */
import { Cause, Clock, Context, Duration, Effect, Layer } from "effect"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type KubeObject } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import { Events } from "./resources.ts"
import type { EventType, InvolvedObject } from "../domain/events.ts"

export type { EventType, InvolvedObject }

export {
  REASON_BAD_ANNOTATION,
  REASON_BAD_CONFIG,
  REASON_GARBAGE_COLLECTED,
  REASON_GC_FAILED,
  REASON_NAD_MISSING,
  REASON_POOL_NEARLY_FULL,
  garbageCollectedMessage,
  gcFailedMessage
} from "../domain/events.ts"

/** `source.component` and `reportingComponent` of every Event we write. */
export const COMPONENT = "whereabouts-controller"
/** An identical event recorded again within this window updates the existing Event. */
export const DEFAULT_AGGREGATION_WINDOW: Duration.Duration = Duration.minutes(10)
/** Distinct events remembered for aggregation (client-go's maxLruCacheEntries). */
export const DEFAULT_CACHE_SIZE = 4096

const apiVersionOfKind = (kind: InvolvedObject["kind"]): string => (kind === "IPPool" ? "whereabouts.cni.cncf.io/v1alpha1" : "v1")

export interface EventRecorderShape {
  /** Records an event about the object; failures are logged as warnings, never returned. */
  readonly record: (regarding: InvolvedObject, type: EventType, reason: string, message: string) => Effect.Effect<void>
}

export class EventRecorder extends Context.Tag("whereabouts-controller/EventRecorder")<EventRecorder, EventRecorderShape>() {}

export interface EventRecorderOptions {
  readonly aggregationWindow?: Duration.DurationInput | undefined
  readonly cacheSize?: number | undefined
}

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
  return {
    get: (key: string): V | undefined => {
      const v = entries.get(key)
      if (v !== undefined) {
        entries.delete(key)
        entries.set(key, v)
      }
      return v
    },
    set: (key: string, v: V): void => {
      entries.delete(key)
      entries.set(key, v)
      if (entries.size > capacity) {
        const oldest = entries.keys().next()
        if (oldest.done !== true) entries.delete(oldest.value)
      }
    }
  }
}

/** Builds a recorder over the KubeApi in context. */
export const make = (
  options: EventRecorderOptions = {}
): Effect.Effect<EventRecorderShape, never, KubeApi | ControllerConfig> =>
  Effect.gen(function*() {
    const api = yield* KubeApi
    const config = yield* ControllerConfig
    const windowMillis = Duration.toMillis(Duration.decode(options.aggregationWindow ?? DEFAULT_AGGREGATION_WINDOW))
    const seen = lru<Seen>(Math.max(1, options.cacheSize ?? DEFAULT_CACHE_SIZE))
    // One lock per event key, dropped when its last user leaves.
    const locks = new Map<string, { readonly lock: Effect.Semaphore; users: number }>()
    const exclusive = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          let entry = locks.get(key)
          if (entry === undefined) locks.set(key, (entry = { lock: Effect.unsafeMakeSemaphore(1), users: 0 }))
          entry.users++
          return entry
        }),
        (entry) => entry.lock.withPermits(1)(effect),
        (entry) =>
          Effect.sync(() => {
            entry.users--
            if (entry.users === 0) locks.delete(key)
          })
      )
    // Names must be unique; under TestClock (or a coarse clock) two creates share a nanosecond.
    let lastNanos = -1n
    // A stalled API call must not hold the event's lock forever: the KubeApi times every request
    // out after it is sent (not while it waits for the client rate limiter: under a backlog of
    // deletions an Event may wait long for its turn, and used to be dropped for it).

    const write = (key: string, regarding: InvolvedObject, type: EventType, reason: string, message: string) =>
      Effect.gen(function*() {
        const nanos = yield* Clock.currentTimeNanos
        const nowMillis = Number(nanos / 1_000_000n)
        const now = rfc3339(nowMillis)
        const previous = seen.get(key)

        if (previous !== undefined && nowMillis - previous.lastSeenMillis < windowMillis) {
          const count = previous.count + 1
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
        const event: KubeObject = {
          apiVersion: "v1",
          kind: "Event",
          metadata: { name, namespace: regarding.namespace },
          involvedObject: {
            apiVersion: apiVersionOfKind(regarding.kind),
            kind: regarding.kind,
            namespace: regarding.namespace,
            name: regarding.name,
            uid: regarding.uid
          },
          reason,
          message,
          type,
          source: { component: COMPONENT },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
          reportingComponent: COMPONENT,
          reportingInstance: config.identity
        }
        yield* api.create(Events, regarding.namespace, event)
        seen.set(key, { name, count: 1, lastSeenMillis: nowMillis })
      })

    const record: EventRecorderShape["record"] = (regarding, type, reason, message) => {
      const key = JSON.stringify([regarding.uid, regarding.kind, regarding.namespace, regarding.name, type, reason, message])
      return exclusive(key, write(key, regarding, type, reason, message)).pipe(
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
          const error = Cause.squash(cause)
          const detail = error instanceof Error ? error.message : String(error)
          const object = `${regarding.kind} ${regarding.namespace}/${regarding.name}`
          return Effect.logWarning(`failed to record ${type} event ${reason} on ${object}: ${detail}`).pipe(
            Effect.annotateLogs({ object, reason, error: detail })
          )
        })
      )
    }

    return { record }
  })

export const layer: Layer.Layer<EventRecorder, never, KubeApi | ControllerConfig> = Layer.effect(EventRecorder, make())
