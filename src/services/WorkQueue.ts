/**
 * WorkQueue: a keyed, rate-limited work queue with client-go's workqueue semantics — a key waits
 * at most once (its latest value wins), at most one worker holds a key, and a key added while it
 * is held is handed out again after `done`. Built by the controller per run; not a Context.Tag.
 *
 * The state (the key sets, the parked takers, the shutdown flag) is plain mutable data touched
 * only inside synchronous blocks: JS runs one fiber step at a time, so each block is atomic and no
 * locks are needed.
 */
import { Clock, Deferred, Duration, Effect, Exit, FiberId, FiberSet, MutableQueue, Option, Schedule, ScheduleDecision, ScheduleIntervals, type Scope } from "effect"
import { backoff } from "./backoff.ts"
import { makeTokenBucket } from "./TokenBucket.ts"

/** client-go's default controller rate limiter: 10 requeues a second overall, after a burst of 100... */
const QPS = 10
const BURST = 100
/** ...and per key 5 ms, 10 ms, 20 ms … capped at 1000 s, not jittered. */
const defaultBackoff = backoff("5 millis", "1000 seconds", { jittered: false })

export interface WorkItem<V> {
  readonly key: string
  readonly value: V
  /** The earliest `since` the key was added with after it was last taken: when its wait began. */
  readonly waitingSince?: number
}

export interface WorkQueue<V> {
  /** Queues the key unless it already waits; a held key is queued again on `done`. `since`: when its wait began, if it is to be timed. */
  readonly add: (key: string, value: V, since?: number) => Effect.Effect<void>
  /** Adds the key once `delay` has passed (dropped if the queue shuts down first). */
  readonly addAfter: (key: string, value: V, delay: Duration.DurationInput) => Effect.Effect<void>
  /**
   * Adds after max(per-key backoff, bucket delay); false (nothing added) once the backoff is spent.
   * After shutdown it adds nothing and returns true: stopping is not giving up on the key.
   */
  readonly addRateLimited: (key: string, value: V) => Effect.Effect<boolean>
  /**
   * Waits for a key, then takes every key already waiting too, up to `max` in all, and marks them
   * held; none once shut down. Interruptible while waiting; keys it returned are the caller's until
   * `done` — take under `Effect.uninterruptibleMask` to be sure.
   */
  readonly takeBatch: (max: number) => Effect.Effect<Option.Option<ReadonlyArray<WorkItem<V>>>>
  /** Releases a held key, queueing it again if it was added meanwhile. */
  readonly done: (key: string) => Effect.Effect<void>
  /** Clears the key's backoff (after success, or after giving up). */
  readonly forget: (key: string) => Effect.Effect<void>
  /** Rate-limited requeues of the key since its last `forget`. */
  readonly numRequeues: (key: string) => Effect.Effect<number>
  /** Keys waiting to be taken. */
  readonly len: Effect.Effect<number>
  /** Keys held by workers. */
  readonly inFlight: Effect.Effect<number>
  /** Every key waiting or held (not those still delayed). */
  readonly keys: Effect.Effect<ReadonlySet<string>>
  /** Stops intake, drops delayed adds and wakes blocked takers with none. */
  readonly shutdown: Effect.Effect<void>
  /** Completes when no key is held. */
  readonly awaitIdle: Effect.Effect<void>
}

/** Fibers parked until woken; a wake-up completes the oldest (or every) parked one. */
const makeWaiters = () => {
  const parked: Array<Deferred.Deferred<void>> = []
  return {
    /** A fresh waiter, parked last. */
    park: (): Deferred.Deferred<void> => {
      const waiter = Deferred.unsafeMake<void>(FiberId.none)
      parked.push(waiter)
      return waiter
    },
    /** Unparks the waiter; false when it was woken already. */
    unpark: (waiter: Deferred.Deferred<void>): boolean => {
      const i = parked.indexOf(waiter)
      if (i < 0) return false
      parked.splice(i, 1)
      return true
    },
    wakeOne: (): void => {
      const waiter = parked.shift()
      if (waiter !== undefined) Deferred.unsafeDone(waiter, Exit.void)
    },
    wakeAll: (): void => {
      for (const waiter of parked.splice(0)) Deferred.unsafeDone(waiter, Exit.void)
    }
  }
}

/**
 * The requeue limit of `addRateLimited`: per key, the next delay of `backoff` (none once it is
 * done), and never sooner than the overall token bucket allows.
 */
const makeRequeueLimit = (backoff: Schedule.Schedule<unknown>, startMillis: number) => {
  const backoffs = new Map<string, { readonly state: unknown; readonly requeues: number }>()
  const bucket = makeTokenBucket(QPS, BURST, startMillis)
  // Steps the schedule directly instead of through a Schedule.driver: driver.next fuses the
  // decision with the sleep, and the caller must learn "given up" now, not after the delay.
  const next = (key: string): Effect.Effect<Option.Option<number>> =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const current = backoffs.get(key) ?? { state: backoff.initial, requeues: 0 }
      const [state, , decision] = yield* backoff.step(now, undefined, current.state)
      if (ScheduleDecision.isDone(decision)) return Option.none()
      backoffs.set(key, { state, requeues: current.requeues + 1 })
      return Option.some(Math.max(ScheduleIntervals.start(decision.intervals) - now, bucket.reserve(now).waitMillis))
    })
  return {
    /** How long the key's next requeue waits (ms); none once its backoff is spent. */
    next,
    forget: (key: string): void => void backoffs.delete(key),
    requeues: (key: string): number => backoffs.get(key)?.requeues ?? 0
  }
}

/**
 * client-go's three sets, synchronous: the waiting keys in order, the dirty keys with their latest
 * values, and the held ones. A key is queued when it turns dirty while not held, or when it is
 * released dirty; `queued` and `idle` tell the caller whom to wake.
 */
const makeKeys = <V>(queued: () => void, idle: () => void) => {
  const queue = MutableQueue.unbounded<string>() // waiting keys: dirty and not held
  const values = new Map<string, V>() // latest value of each dirty key
  const since = new Map<string, number>() // earliest timed add of each key since it was last taken
  const dirty = new Set<string>() // keys needing (re)processing
  const processing = new Set<string>()
  const enqueue = (key: string): void => {
    MutableQueue.offer(queue, key)
    queued()
  }
  return {
    add: (key: string, value: V, at: number | undefined): void => {
      values.set(key, value)
      if (at !== undefined && !since.has(key)) since.set(key, at)
      if (dirty.has(key)) return
      dirty.add(key)
      if (!processing.has(key)) enqueue(key)
    },
    /** The oldest waiting key, now held; undefined when none waits. */
    poll: (): WorkItem<V> | undefined => {
      const key = MutableQueue.poll(queue, undefined)
      if (key === undefined) return undefined
      const value = values.get(key) as V // every queued key is dirty, so it has a value
      const waitingSince = since.get(key)
      values.delete(key)
      since.delete(key)
      dirty.delete(key)
      processing.add(key)
      return waitingSince === undefined ? { key, value } : { key, value, waitingSince }
    },
    done: (key: string): void => {
      if (!processing.delete(key)) return
      if (dirty.has(key)) enqueue(key)
      if (processing.size === 0) idle()
    },
    waiting: (): number => MutableQueue.length(queue),
    held: (): number => processing.size,
    all: (): ReadonlySet<string> => new Set([...dirty, ...processing])
  }
}

type Keys<V> = ReturnType<typeof makeKeys<V>>

/**
 * The oldest waiting key, now held, waiting for one if none waits; none once `stopped()`.
 * A wake-up is a hint, not a hand-off: the key stays queued until a running taker pops it, so an
 * interrupted taker can't swallow a key (Effect's Queue.take can, between the hand-off and the taker
 * resuming). Only the wait itself is interruptible.
 */
const takeFrom = <V>(keys: Keys<V>, takers: ReturnType<typeof makeWaiters>, stopped: () => boolean) => {
  const loop: Effect.Effect<Option.Option<WorkItem<V>>> = Effect.suspend(() => {
    if (stopped()) return Effect.succeedNone
    const item = keys.poll()
    if (item !== undefined) return Effect.succeedSome(item)
    const waiter = takers.park()
    return Effect.interruptible(Deferred.await(waiter)).pipe(
      // Already woken: pass the wake-up on, or the key it announced waits with takers asleep.
      Effect.onInterrupt(() => Effect.sync(() => takers.unpark(waiter) || takers.wakeOne())),
      Effect.zipRight(loop)
    )
  })
  return loop
}

/** Up to `max` of the keys already waiting, now held; it never waits. */
const pollUpTo = <V>(keys: Keys<V>, max: number): Array<WorkItem<V>> => {
  const items: Array<WorkItem<V>> = []
  while (items.length < max) {
    const item = keys.poll()
    if (item === undefined) break
    items.push(item)
  }
  return items
}

/** Creates a queue whose delayed adds live in the surrounding scope; `backoff` gives the per-key delays of `addRateLimited`. */
export const make = <V>(options: { readonly backoff?: Schedule.Schedule<unknown> | undefined } = {}): Effect.Effect<WorkQueue<V>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const delayed = yield* FiberSet.make<void>()
    const limit = makeRequeueLimit(options.backoff ?? defaultBackoff, yield* Clock.currentTimeMillis)
    const takers = makeWaiters()
    const idlers = makeWaiters()
    const keys = makeKeys<V>(takers.wakeOne, idlers.wakeAll)
    let shuttingDown = false

    const add = (key: string, value: V, since?: number) =>
      Effect.sync(() => {
        if (!shuttingDown) keys.add(key, value, since)
      })

    const takeLoop = takeFrom(keys, takers, () => shuttingDown)
    // The first key may be waited for; the rest are only those already waiting.
    const takeBatch = (max: number) => Effect.uninterruptible(Effect.map(takeLoop, Option.map((first) => [first, ...pollUpTo(keys, max - 1)])))

    const addAfter = (key: string, value: V, delay: Duration.DurationInput) => {
      const millis = Duration.toMillis(delay)
      if (millis <= 0) return add(key, value)
      return Effect.suspend(() =>
        shuttingDown ? Effect.void : FiberSet.run(delayed, Effect.zipRight(Effect.sleep(millis), add(key, value)))
      ).pipe(Effect.asVoid)
    }

    const addRateLimited = (key: string, value: V) =>
      Effect.suspend(() => {
        if (shuttingDown) return Effect.succeed(true) // not a give-up: this process just runs no more work
        return Effect.flatMap(limit.next(key), (wait) =>
          Option.match(wait, { onNone: () => Effect.succeed(false), onSome: (ms) => Effect.as(addAfter(key, value, Duration.millis(ms)), true) })
        )
      })

    return {
      add,
      addAfter,
      addRateLimited,
      takeBatch,
      done: (key) => Effect.sync(() => keys.done(key)),
      forget: (key) => Effect.sync(() => limit.forget(key)),
      numRequeues: (key) => Effect.sync(() => limit.requeues(key)),
      len: Effect.sync(keys.waiting),
      inFlight: Effect.sync(keys.held),
      keys: Effect.sync(keys.all),
      shutdown: Effect.suspend(() => {
        shuttingDown = true
        takers.wakeAll()
        return FiberSet.clear(delayed)
      }),
      awaitIdle: Effect.suspend(() => (keys.held() === 0 ? Effect.void : Deferred.await(idlers.park())))
    } satisfies WorkQueue<V>
  })
