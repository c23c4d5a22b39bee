/**
 * A list-watch cache over KubeApi for every resource: paginated list, watch from the list's version,
 * resume after a closed watch, relist on 410 and restart on any other error, both with backoff
 * (client-node's informer stops for good), a synced signal, secondary indexes, and events — deletions a relist finds too.
 */
import { Clock, Deferred, Effect, Option, PubSub, Queue, Schedule, type Scope, Stream } from "effect"
import { backoff } from "./backoff.ts"
import { KubeApi, type KubeApiShape, type KubeObject, forEachPage } from "./KubeApi.ts"
import { type KubeError, isTransient, isUnreachable } from "./KubeError.ts"
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
  /** The resource may not be served (no CRD): a list answered 404 makes the cache empty and synced, tried again every ABSENT_RETRY. */
  readonly optional?: boolean
}

export interface Informer<A> {
  readonly resource: Resource
  /** Completes once the first full list is in the cache. */
  readonly awaitSynced: Effect.Effect<void>
  readonly isSynced: Effect.Effect<boolean>
  readonly get: (key: string) => Option.Option<A>
  readonly values: () => ReadonlyArray<A>
  /** The cache itself by key, read-only and live (it follows the informer): for a pass over it without a copy. */
  readonly byKey: ReadonlyMap<string, A>
  readonly byIndex: (index: string, value: string) => ReadonlyArray<A>
  /** Events from now on; subscribe before relying on them. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<InformerEvent<A>>, never, Scope.Scope>
  /**
   * One item per list after the first, once its events are published: the watch had a gap (410, or a
   * restart), and an object created and deleted inside it was in no list and no event. Subscribe first.
   */
  readonly subscribeRelists: Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
  /** Restarts after errors, for health reporting. */
  readonly restarts: () => number
  /** How many changes the cache has taken: a reader that finds it unchanged may keep what it derived from the cache. */
  readonly changes: () => number
}

/** Several caches' change counts as one value: equal to an earlier one while none of them has changed since. */
export const changeStamp = (informers: ReadonlyArray<Pick<Informer<unknown>, "changes">>): string => informers.map((i) => i.changes()).join(",")

/**
 * The keys an index holds under one value: an array up to SMALL_INDEX_KEYS (most values name a few
 * objects, where an array costs a fraction of a Set's hash table), a Set past that (a node's pods).
 * An array is replaced by one of its exact length, never grown in place (push leaves spare slots).
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

/** The cache and its indexes; `put` and `remove` answer the events a change makes (none for a version already held). */
const makeStore = <A>(options: Pick<InformerOptions<A>, "keyOf" | "identityOf" | "versionOf" | "indexers">) => {
  const { keyOf, versionOf } = options
  const identityOf = options.identityOf ?? keyOf
  const cache = new Map<string, A>()
  const indexes = makeIndexes(options.indexers ?? {})
  const state = { changes: 0 }
  const put = (a: A): Array<InformerEvent<A>> => {
    const key = keyOf(a)
    const old = cache.get(key)
    if (old !== undefined) indexes.remove(key, old)
    cache.set(key, a)
    indexes.add(key, a)
    state.changes++
    if (old === undefined) return [{ type: "add", object: a }]
    if (identityOf(old) !== identityOf(a)) return [{ type: "delete", object: old }, { type: "add", object: a }]
    return versionOf(old) === versionOf(a) ? [] : [{ type: "update", object: a, old }]
  }
  const remove = (a: A): Array<InformerEvent<A>> => {
    const key = keyOf(a)
    const old = cache.get(key)
    if (old !== undefined) {
      indexes.remove(key, old)
      cache.delete(key)
      state.changes++
    }
    return [{ type: "delete", object: a }]
  }
  /** Removes every object whose key `keep` refuses. */
  const prune = (keep: (key: string) => boolean) => [...cache].flatMap(([key, old]) => (keep(key) ? [] : remove(old)))
  return { cache, indexes, put, remove, prune, changes: () => state.changes }
}

type Store<A> = ReturnType<typeof makeStore<A>>

const rewatchBackoff = backoff("250 millis", "5 seconds", { attempts: 9 })
/** How often an optional resource found not served is looked at again. */
const ABSENT_RETRY = "1 minute"
const restartBackoff = backoff("1 second", "30 seconds")

/** What one informer's loops share: its API, options, store, outlets and counters. */
interface Loop<A> {
  readonly api: KubeApiShape
  readonly options: InformerOptions<A>
  readonly store: Store<A>
  readonly synced: Deferred.Deferred<void>
  readonly pubsub: PubSub.PubSub<InformerEvent<A>>
  readonly relists: PubSub.PubSub<void>
  readonly state: {
    /** When the informer started (its sync time is logged from here). */
    readonly startedAt: number
    lists: number
    restarts: number
    /** An optional resource found not served (until a list succeeds again). */
    absent: boolean
    /**
     * A watch that delivered events or ran to its end proves the API works: the next failure starts
     * the backoff afresh. A list alone does not: a watch refused every time (403) would relist every second.
     */
    driverReset: boolean
  }
}

const publish = <A>(l: Loop<A>, events: ReadonlyArray<InformerEvent<A>>) => (events.length === 0 ? Effect.void : PubSub.publishAll(l.pubsub, events))

/**
 * Lists everything, publishes what changed since the cache was last right (deletions too); answers the
 * list's version. Each page goes into the cache as it comes: a relist holds only the keys it has seen.
 */
const relist = <A>(l: Loop<A>) =>
  Effect.gen(function* () {
    const { options, store } = l
    let seen = new Set<string>()
    const applyPage = (page: ReadonlyArray<KubeObject>) =>
      Effect.suspend(() =>
        publish(l, page.flatMap((o) => {
          const a = options.transform(o)
          seen.add(options.keyOf(a))
          return store.put(a)
        }))
      )
    const resourceVersion = yield* forEachPage(options.resource, options.namespace, applyPage, {
      pageSize: options.pageSize,
      fieldSelector: options.fieldSelector,
      // A list started again (its continue token expired) sees every object again.
      onStart: () => void (seen = new Set())
    })
    // Whatever vanished while we were not watching was deleted: say so.
    yield* publish(l, store.prune((key) => seen.has(key)))
    if (yield* Deferred.succeed(l.synced, undefined)) {
      // Once per informer: which cache an operator waits for at start-up, and how long it took.
      const ms = (yield* Clock.currentTimeMillis) - l.state.startedAt
      yield* Effect.logInfo(`${options.resource.plural} cache synced`).pipe(
        Effect.annotateLogs({ resource: options.resource.plural, objects: store.cache.size, seconds: (ms / 1000).toFixed(1) })
      )
    }
    if (l.state.lists++ > 0) yield* PubSub.publish(l.relists, undefined)
    l.state.absent = false
    return resourceVersion
  })

/** Watches from a version until the watch ends, publishing its events; answers the last version seen. */
const watchFrom = <A>(l: Loop<A>, fromVersion: string): Effect.Effect<string, KubeError> => {
  const { options, store } = l
  let version = fromVersion
  return l.api
    .watch(options.resource, options.namespace, {
      resourceVersion: version,
      fieldSelector: options.fieldSelector,
      // Ended by the server after 5 to 10 minutes, as client-go's reflector asks; then resumed from the last version.
      timeoutSeconds: 300 + Math.floor(Math.random() * 300)
    })
    .pipe(
      Stream.runForEach((event) => {
        l.state.driverReset = true
        if (event.type === "BOOKMARK") {
          version = event.resourceVersion
          return Effect.void
        }
        version = event.object.metadata.resourceVersion ?? version
        const a = options.transform(event.object)
        return publish(l, event.type === "DELETED" ? store.remove(a) : store.put(a))
      }),
      Effect.map(() => version)
    )
}

/** One run: list, then watch and resume until an error ends it (a 410 too: the next run lists again). */
const run = <A>(l: Loop<A>) =>
  Effect.gen(function* () {
    let version = yield* relist(l)
    for (;;) {
      // An API server restarting refuses connections for a while: resume the watch from where
      // it was (as client-go does) instead of relisting everything; give up after a few tries.
      version = yield* watchFrom(l, version).pipe(Effect.retry({ schedule: rewatchBackoff, while: isTransient }))
      l.state.driverReset = true
    }
  })

/** Not served (see `optional`): the cache empty and synced, so the controller runs without it, until ABSENT_RETRY has passed. */
const whileAbsent = <A>(l: Loop<A>, e: KubeError) =>
  Effect.gen(function* () {
    const { resource } = l.options
    if (!l.state.absent) {
      l.state.absent = true
      yield* Effect.logWarning(`${resource.plural} are not served (their CRD is not installed?): running without them, looking again periodically`).pipe(
        Effect.annotateLogs({ resource: resource.plural, error: e.message })
      )
    }
    yield* publish(l, l.store.prune(() => false))
    yield* Deferred.succeed(l.synced, undefined)
    yield* Effect.sleep(ABSENT_RETRY)
  })

/** Runs the informer for good: after an error, restarts with backoff (afresh once the API was seen working). */
const supervise = <A>(l: Loop<A>) =>
  Effect.gen(function* () {
    const { options } = l
    const backoff = yield* Schedule.driver(restartBackoff)
    const restart = (e: KubeError) =>
      Effect.gen(function* () {
        // A version too old to resume from (410: history compacted, for a watch or a list's continue
        // token) is routine, not a failure: relist, but on the same backoff, as client-go's reflector
        // does, so a server that answers 410 again at once is not sent every object in a loop.
        const gone = e.reason === "Gone"
        if (!gone) l.state.restarts++
        if (l.state.driverReset) {
          yield* backoff.reset
          l.state.driverReset = false
        }
        // An unreachable server fails every informer at once: reachability.ts says so once, these are detail.
        const log = gone || isUnreachable(e) ? Effect.logDebug : Effect.logWarning
        yield* log(gone ? `${options.resource.plural}: version too old to resume (410), listing again` : `informer for ${options.resource.plural} failed, restarting`).pipe(
          Effect.annotateLogs({ resource: options.resource.plural, error: e.message })
        )
        yield* Effect.orDie(backoff.next(undefined)) // never done: the restart backoff has no end
      })
    return yield* Effect.forever(
      run(l).pipe(
        Effect.catchIf((e) => options.optional === true && e.reason === "NotFound", (e) => whileAbsent(l, e)),
        Effect.catchAll(restart)
      )
    )
  })

/** Starts an informer in the current scope; it stops when the scope closes. */
export const makeInformer = <A>(options: InformerOptions<A>): Effect.Effect<Informer<A>, never, KubeApi | Scope.Scope> =>
  Effect.gen(function* () {
    const loop: Loop<A> = {
      api: yield* KubeApi,
      options,
      store: makeStore(options),
      synced: yield* Deferred.make<void>(),
      pubsub: yield* Effect.acquireRelease(PubSub.unbounded<InformerEvent<A>>(), PubSub.shutdown),
      relists: yield* Effect.acquireRelease(PubSub.sliding<void>(1), PubSub.shutdown),
      state: { startedAt: yield* Clock.currentTimeMillis, lists: 0, restarts: 0, absent: false, driverReset: false }
    }
    yield* Effect.forkScoped(supervise(loop))
    const { cache, indexes } = loop.store
    return {
      resource: options.resource,
      awaitSynced: Deferred.await(loop.synced),
      isSynced: Deferred.isDone(loop.synced),
      get: (key) => Option.fromNullable(cache.get(key)),
      values: () => [...cache.values()],
      byKey: cache,
      byIndex: (name, value) => [...indexes.keys(name, value)].flatMap((k) => cache.get(k) ?? []),
      subscribe: PubSub.subscribe(loop.pubsub),
      subscribeRelists: PubSub.subscribe(loop.relists),
      restarts: () => loop.state.restarts,
      changes: loop.store.changes
    } satisfies Informer<A>
  })
