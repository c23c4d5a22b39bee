/**
 * A list-watch cache over KubeApi, written once for every resource: paginated list, watch
 * from the list's version, resume after a closed watch, relist on 410, restart with backoff
 * on any other error (client-node's informer stops for good), a synced signal, secondary
 * indexes, and events — including deletions discovered by a relist.
 */
import { Deferred, Duration, Effect, Option, PubSub, Queue, Schedule, type Scope, Stream } from "effect"
import { KubeApi, type KubeObject, listProjected } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import type { Resource } from "./resources.ts"

export type InformerEvent<A> =
  | { readonly type: "add"; readonly object: A }
  | { readonly type: "update"; readonly object: A; readonly old: A }
  | { readonly type: "delete"; readonly object: A }

export interface InformerOptions<A> {
  readonly resource: Resource
  /** undefined watches every namespace. */
  readonly namespace?: string | undefined
  /** Only these objects (e.g. `metadata.name=x`: RBAC can then grant just that one by name). */
  readonly fieldSelector?: string | undefined
  /** What the cache keeps of an object (a small projection, never the object itself when avoidable). */
  readonly transform: (o: KubeObject) => A
  readonly keyOf: (a: A) => string
  /** Distinguishes two objects under one key (a pod re-created with the same name); defaults to the key. */
  readonly identityOf?: (a: A) => string
  readonly versionOf: (a: A) => string | undefined
  readonly indexers?: Readonly<Record<string, (a: A) => ReadonlyArray<string>>>
  readonly pageSize?: number
  /** Backoff between restarts after errors; default exponential 1 s → 30 s, jittered. */
  readonly backoff?: Schedule.Schedule<unknown, unknown>
  /** Server-side watch timeout; the watch is then resumed from the last version. */
  readonly watchTimeoutSeconds?: number
  /**
   * The resource may not be served (its CRD not installed): a list answered 404 makes the cache
   * empty and synced, and the list is tried again every `absentRetry` (not counted as a restart).
   */
  readonly optional?: { readonly absentRetry: Duration.DurationInput }
}

export interface Informer<A> {
  readonly resource: Resource
  /** Completes once the first full list is in the cache. */
  readonly awaitSynced: Effect.Effect<void>
  readonly isSynced: Effect.Effect<boolean>
  readonly get: (key: string) => Option.Option<A>
  readonly values: () => ReadonlyArray<A>
  readonly size: () => number
  readonly byIndex: (index: string, value: string) => ReadonlyArray<A>
  /** Events from now on; subscribe before relying on them. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<InformerEvent<A>>, never, Scope.Scope>
  /**
   * One item per list after the first, once its events are published: the watch had a gap (410,
   * or a restart after an error), and an object created and deleted inside it was in no list and
   * no event. Subscribe before relying on it.
   */
  readonly subscribeRelists: Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
  /** Restarts after errors, for health reporting. */
  readonly restarts: () => number
}

const TRANSIENT: ReadonlySet<string> = new Set(["Unavailable", "Timeout", "TooManyRequests"])

/**
 * The keys an index holds under one value. Most values name a few objects (a podref's pools and
 * reservations, one per interface), and a small array costs a fraction of a Set's hash table, so
 * keys are kept in an array up to SMALL_INDEX_KEYS and in a Set past that (a node's pods), where
 * a linear search would grow with the value's fan-out. An array is replaced by one of its exact
 * length (concat, toSpliced), never grown in place: push, spread and filter leave a backing store
 * of half again plus 16 slots, most of them never used.
 */
type IndexKeys = ReadonlyArray<string> | Set<string>
const SMALL_INDEX_KEYS = 16

/** The keys with `key` added: the same Set, or a new array (a Set once past SMALL_INDEX_KEYS). */
const addKey = (keys: IndexKeys, key: string): IndexKeys => {
  if (keys instanceof Set) return keys.add(key)
  if (keys.includes(key)) return keys
  return keys.length < SMALL_INDEX_KEYS ? keys.concat(key) : new Set([...keys, key])
}

/** The keys without `key`: the same Set, or a new array; undefined once none is left. */
const dropKey = (keys: IndexKeys, key: string): IndexKeys | undefined => {
  if (keys instanceof Set) {
    keys.delete(key)
    return keys.size === 0 ? undefined : keys
  }
  const at = keys.indexOf(key)
  if (at < 0) return keys
  return keys.length === 1 ? undefined : keys.toSpliced(at, 1)
}

/** A cache's indexes: per indexer, each value's keys; kept up to date as objects come and go. */
const makeIndexes = <A>(indexers: Readonly<Record<string, (a: A) => ReadonlyArray<string>>>) => {
  const byName = new Map(Object.entries(indexers).map(([name, fn]) => [name, { fn, idx: new Map<string, IndexKeys>() }]))
  const update = (a: A, change: (keys: IndexKeys | undefined) => IndexKeys | undefined) => {
    for (const { fn, idx } of byName.values()) {
      for (const v of fn(a)) {
        const keys = idx.get(v)
        const next = change(keys)
        if (next === undefined) idx.delete(v)
        else if (next !== keys) idx.set(v, next)
      }
    }
  }
  return {
    add: (key: string, a: A) => update(a, (keys) => (keys === undefined ? [key] : addKey(keys, key))),
    remove: (key: string, a: A) => update(a, (keys) => (keys === undefined ? undefined : dropKey(keys, key))),
    keys: (name: string, value: string): Iterable<string> => byName.get(name)?.idx.get(value) ?? []
  }
}

const rewatchBackoff = Schedule.exponential("250 millis").pipe(
  Schedule.either(Schedule.spaced("5 seconds")),
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(8))
)

const defaultBackoff = Schedule.exponential("1 second").pipe(
  Schedule.either(Schedule.spaced("30 seconds")),
  Schedule.jittered
)

/** Starts an informer in the current scope; it stops when the scope closes. */
export const makeInformer = <A>(options: InformerOptions<A>): Effect.Effect<Informer<A>, never, KubeApi | Scope.Scope> =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const { resource, namespace, transform, keyOf, versionOf } = options
    const identityOf = options.identityOf ?? keyOf
    const cache = new Map<string, A>()
    const indexes = makeIndexes(options.indexers ?? {})
    const synced = yield* Deferred.make<void>()
    const pubsub = yield* Effect.acquireRelease(PubSub.unbounded<InformerEvent<A>>(), PubSub.shutdown)
    const relists = yield* Effect.acquireRelease(PubSub.sliding<void>(1), PubSub.shutdown)
    let lists = 0
    let restarts = 0
    /** An optional resource found not served (until a list succeeds again). */
    let absent = false

    const put = (a: A): Array<InformerEvent<A>> => {
      const key = keyOf(a)
      const old = cache.get(key)
      if (old !== undefined) indexes.remove(key, old)
      cache.set(key, a)
      indexes.add(key, a)
      if (old === undefined) return [{ type: "add", object: a }]
      if (identityOf(old) !== identityOf(a)) return [{ type: "delete", object: old }, { type: "add", object: a }]
      return versionOf(old) === versionOf(a) ? [] : [{ type: "update", object: a, old }]
    }
    const remove = (a: A): Array<InformerEvent<A>> => {
      const key = keyOf(a)
      const old = cache.get(key)
      if (old === undefined) return [{ type: "delete", object: a }]
      indexes.remove(key, old)
      cache.delete(key)
      return [{ type: "delete", object: a }]
    }
    const publish = (events: ReadonlyArray<InformerEvent<A>>) =>
      events.length === 0 ? Effect.void : PubSub.publishAll(pubsub, events)

    const relist = Effect.gen(function* () {
      // Projected page by page: full objects never pile up.
      const { items, resourceVersion } = yield* listProjected(resource, namespace, transform, {
        pageSize: options.pageSize ?? 500,
        ...(options.fieldSelector === undefined ? {} : { fieldSelector: options.fieldSelector })
      })
      const seen = new Set<string>()
      const events: Array<InformerEvent<A>> = []
      for (const a of items) {
        seen.add(keyOf(a))
        events.push(...put(a))
      }
      // Whatever vanished while we were not watching was deleted: say so.
      for (const [key, old] of [...cache]) if (!seen.has(key)) events.push(...remove(old))
      yield* publish(events)
      yield* Deferred.succeed(synced, undefined)
      if (lists++ > 0) yield* PubSub.publish(relists, undefined)
      absent = false
      return resourceVersion
    })

    // A watch that delivered events or ran to its end proves the API works: the next failure starts
    // the backoff afresh. A successful list alone does not: with a watch that is refused every time
    // (403, say) each restart would relist everything once a second instead of backing off.
    let driverReset = false

    const watchFrom = (fromVersion: string): Effect.Effect<string, KubeError> => {
      let version = fromVersion
      return api
        .watch(resource, namespace, {
          resourceVersion: version,
          fieldSelector: options.fieldSelector,
          timeoutSeconds: options.watchTimeoutSeconds ?? 300 + Math.floor(Math.random() * 300)
        })
        .pipe(
          Stream.runForEach((event) => {
            driverReset = true
            if (event.type === "BOOKMARK") {
              version = event.resourceVersion
              return Effect.void
            }
            version = event.object.metadata.resourceVersion ?? version
            const a = transform(event.object)
            return publish(event.type === "DELETED" ? remove(a) : put(a))
          }),
          Effect.map(() => version)
        )
    }

    // One run: list, then watch and resume until a non-410 error ends it.
    const run = Effect.gen(function* () {
      let version = yield* relist
      for (;;) {
        const next = yield* Effect.either(
          // An API server restarting refuses connections for a while: resume the watch from where
          // it was (as client-go does) instead of relisting everything; give up after a few tries.
          watchFrom(version).pipe(Effect.retry({ schedule: rewatchBackoff, while: (e) => TRANSIENT.has(e.reason) }))
        )
        if (next._tag === "Right") {
          version = next.right
          driverReset = true
        } else if (next.left.reason === "Gone") version = yield* relist
        else return yield* Effect.fail(next.left)
      }
    })

    // Not served at all: nothing to cache, and synced so the controller runs without it.
    const whileAbsent = (e: KubeError) =>
      Effect.gen(function* () {
        if (!absent) {
          absent = true
          yield* Effect.logWarning(`${resource.plural} are not served (their CRD is not installed?): running without them, looking again periodically`).pipe(
            Effect.annotateLogs({ resource: resource.plural, error: e.message })
          )
        }
        const events: Array<InformerEvent<A>> = []
        for (const old of [...cache.values()]) events.push(...remove(old))
        yield* publish(events)
        yield* Deferred.succeed(synced, undefined)
        yield* Effect.sleep(options.optional!.absentRetry)
      })

    const backoff = yield* Schedule.driver(options.backoff ?? defaultBackoff)
    const supervised = Effect.forever(
      run.pipe(
        Effect.catchIf((e) => options.optional !== undefined && e.reason === "NotFound", whileAbsent),
        Effect.catchAll((e) =>
          Effect.gen(function* () {
            restarts++
            if (driverReset) {
              yield* backoff.reset
              driverReset = false
            }
            yield* Effect.logWarning(`informer for ${resource.plural} failed, restarting`).pipe(
              Effect.annotateLogs({ resource: resource.plural, error: e.message })
            )
            yield* backoff.next(undefined).pipe(Effect.catchAll(() => Effect.sleep(Duration.seconds(30))))
          })
        )
      )
    )
    yield* Effect.forkScoped(supervised)

    return {
      resource,
      awaitSynced: Deferred.await(synced),
      isSynced: Deferred.isDone(synced),
      get: (key) => Option.fromNullable(cache.get(key)),
      values: () => [...cache.values()],
      size: () => cache.size,
      byIndex: (name, value) => {
        return [...indexes.keys(name, value)].flatMap((k) => cache.get(k) ?? [])
      },
      subscribe: PubSub.subscribe(pubsub),
      subscribeRelists: PubSub.subscribe(relists),
      restarts: () => restarts
    } satisfies Informer<A>
  })
