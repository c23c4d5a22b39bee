/**
 * LeaderElection: client-go's leaderelection with a LeaseLock, over KubeApi. A held lease is taken
 * over only when it has not changed for leaseDurationSeconds of OUR clock (client-go's observedTime:
 * other nodes' clocks are never compared with ours); every write carries the resourceVersion we
 * read, so the API server arbitrates races. The leader steps down when no renewal succeeded for
 * RENEW_DEADLINE (< LEASE_DURATION, so it stops before anyone may take over).
 */
import { Clock, Context, Duration, Effect, Either, Fiber, Layer, Random, Schema, Stream, SubscriptionRef } from "effect"
import { ControllerConfig, type ControllerConfigShape, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD } from "./ControllerConfig.ts"
import { KubeApi, type KubeApiShape, type KubeObject, objectKey } from "./KubeApi.ts"
import { type KubeError, isUnreachable } from "./KubeError.ts"
import { Leases, apiVersionOf } from "./resources.ts"

/** client-go's wait.JitterUntil factor: a candidate's retries are spread over up to 2.2 × RETRY_PERIOD. */
export const JITTER_FACTOR = 1.2

export interface LeaderElectionShape {
  /** The current leadership (always true with leader election off), then each change. */
  readonly changes: Stream.Stream<boolean>
  /**
   * Campaigns; runs `work` while leader and interrupts it as soon as leadership is lost, then
   * campaigns again. Never succeeds; fails only when `work` fails. Interrupting it stops the work,
   * then releases the lease. One caller at a time: each call is a campaign of its own.
   */
  readonly runWhenLeader: <A, E, R>(work: Effect.Effect<A, E, R>) => Effect.Effect<never, E, R>
}

export class LeaderElection extends Context.Tag("whereabouts-controller/LeaderElection")<LeaderElection, LeaderElectionShape>() {}

/** metav1.MicroTime: "2006-01-02T15:04:05.000000Z". */
const formatMicroTime = (nanos: bigint): string => {
  const seconds = new Date(Number(nanos / 1_000_000n)).toISOString().slice(0, 19)
  return `${seconds}.${((nanos / 1000n) % 1_000_000n).toString().padStart(6, "0")}Z`
}

/** The lease fields leader election owns (client-go's LeaderElectionRecord); missing or null ones read as empty. */
const LeaderRecord = Schema.Struct({
  holderIdentity: Schema.optionalWith(Schema.String, { nullable: true, default: () => "" }),
  leaseDurationSeconds: Schema.optionalWith(Schema.Number, { nullable: true, default: () => 0 }),
  acquireTime: Schema.optionalWith(Schema.String, { nullable: true, default: () => "" }),
  renewTime: Schema.optionalWith(Schema.String, { nullable: true, default: () => "" }),
  leaseTransitions: Schema.optionalWith(Schema.Number, { nullable: true, default: () => 0 })
})
type LeaderRecord = typeof LeaderRecord.Type
const decodeRecord = Schema.decodeUnknownEither(LeaderRecord, { onExcessProperty: "ignore" })
const recordOf = (lease: KubeObject) => Either.mapLeft(decodeRecord(lease["spec"] ?? {}), (e) => e.message)

interface Observed {
  readonly record: LeaderRecord
  /** Local clock (ms) when we first saw this record: expiry counts from here. */
  readonly time: number
  /** The lease as last read or written: its resourceVersion guards our next write. */
  readonly lease: KubeObject
}

type Attempt = "acquired" | "held" | "failed"

/** One campaign: the lease it names, and the lease as it last observed it. */
interface Candidate {
  readonly api: KubeApiShape
  readonly config: ControllerConfigShape
  readonly name: string
  readonly namespace: string
  observed: Observed | undefined
}

const leading = (c: Candidate): boolean => c.observed?.record.holderIdentity === c.config.identity
const valid = (o: Observed, nowMillis: number) => o.time + o.record.leaseDurationSeconds * 1000 > nowMillis

const observe = (c: Candidate, lease: KubeObject, record: LeaderRecord) => Effect.map(Clock.currentTimeMillis, (time) => void (c.observed = { record, time, lease }))

/** Writes the record over the lease (guarded by its resourceVersion); other spec fields (strategy, preferredHolder) are kept. */
const write = (c: Candidate, lease: KubeObject, record: LeaderRecord) =>
  c.api.replace(Leases, c.namespace, { ...lease, spec: { ...(lease["spec"] as object | undefined), ...record } }).pipe(
    Effect.tap((written) => observe(c, written, record))
  )

/**
 * "acquired" once `effect` succeeds, else "failed", logged at debug when the server is unreachable
 * (reachability.ts says that once) or on a Conflict (another candidate won this round).
 */
const tried = (what: string, effect: Effect.Effect<unknown, KubeError>): Effect.Effect<Attempt> =>
  effect.pipe(
    Effect.as("acquired" as const),
    Effect.catchAll((e) =>
      Effect.as(
        e.reason === "Conflict"
          ? Effect.logDebug(`lease update conflicted: ${e.message}`)
          : (isUnreachable(e) ? Effect.logDebug : Effect.logWarning)(`${what}: ${e.message}`),
        "failed" as const
      )
    )
  )

/** The lease as just read: held by someone else until it has not changed for its duration, else ours to write. */
const claim = (c: Candidate, lease: KubeObject, desired: LeaderRecord, nowMillis: number): Effect.Effect<Attempt> =>
  Effect.gen(function*() {
    const current = recordOf(lease)
    if (Either.isLeft(current)) {
      yield* Effect.logWarning(`malformed lease spec: ${current.left}`)
      return "failed"
    }
    const record = current.right
    if (c.observed === undefined || JSON.stringify(c.observed.record) !== JSON.stringify(record)) yield* observe(c, lease, record)
    else c.observed = { ...c.observed, lease }
    if (record.holderIdentity !== "" && valid(c.observed!, nowMillis) && !leading(c)) return "held"
    const next: LeaderRecord = leading(c)
      ? { ...desired, acquireTime: record.acquireTime, leaseTransitions: record.leaseTransitions }
      : { ...desired, leaseTransitions: record.leaseTransitions + 1 }
    return yield* tried("failed to update lease", write(c, lease, next))
  })

const tryAcquireOrRenew = (c: Candidate): Effect.Effect<Attempt> =>
  Effect.gen(function*() {
    const nanos = yield* Clock.currentTimeNanos
    const nowMillis = Number(nanos / 1_000_000n)
    const now = formatMicroTime(nanos)
    const desired: LeaderRecord = {
      holderIdentity: c.config.identity,
      leaseDurationSeconds: Duration.toSeconds(LEASE_DURATION),
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 0
    }
    // Fast path: the leader assumes the lease is still the version it wrote last.
    if (leading(c) && valid(c.observed!, nowMillis)) {
      const { acquireTime, leaseTransitions } = c.observed!.record
      const renewed = yield* Effect.either(write(c, c.observed!.lease, { ...desired, acquireTime, leaseTransitions }))
      if (Either.isRight(renewed)) return "acquired"
      yield* Effect.logDebug(`optimistic lease update failed, re-reading: ${renewed.left.message}`)
    }
    const got = yield* Effect.either(c.api.get(Leases, c.namespace, c.name))
    if (Either.isRight(got)) return yield* claim(c, got.right, desired, nowMillis)
    if (got.left.reason !== "NotFound") return yield* tried("error retrieving lease", Effect.fail(got.left))
    // No lease yet: create it, naming us.
    const lease: KubeObject = { apiVersion: apiVersionOf(Leases), kind: Leases.kind, metadata: { name: c.name, namespace: c.namespace }, spec: { ...desired } }
    return yield* tried("error creating lease", Effect.flatMap(c.api.create(Leases, c.namespace, lease), (created) => observe(c, created, desired)))
  })

/** A hung API call counts as a failed attempt. */
const within = (duration: Duration.Duration, attempt: Effect.Effect<Attempt>) =>
  Effect.timeoutTo(attempt, { duration, onSuccess: (a) => a, onTimeout: (): Attempt => "failed" })

/** Polls until we hold the lease; returns when the winning attempt started (local ms). */
const acquire = (c: Candidate) =>
  Effect.gen(function*() {
    while (true) {
      const start = yield* Clock.currentTimeMillis
      if ((yield* within(RENEW_DEADLINE, tryAcquireOrRenew(c))) === "acquired") return start
      const jitter = yield* Random.next
      yield* Effect.sleep(Duration.millis(Duration.toMillis(RETRY_PERIOD) * (1 + jitter * JITTER_FACTOR)))
    }
  })

/** Renews every RETRY_PERIOD; returns why leadership was lost. */
const renew = (c: Candidate, acquiredAt: number) =>
  Effect.gen(function*() {
    const retryMillis = Duration.toMillis(RETRY_PERIOD)
    let lastRenewal = acquiredAt
    let wait = retryMillis
    while (true) {
      yield* Effect.sleep(Duration.millis(wait))
      const start = yield* Clock.currentTimeMillis
      const deadline = lastRenewal + Duration.toMillis(RENEW_DEADLINE)
      const attempt: Attempt = start >= deadline ? "failed" : yield* within(Duration.millis(deadline - start), tryAcquireOrRenew(c))
      if (attempt === "acquired") {
        lastRenewal = start
        wait = retryMillis
        continue
      }
      if (attempt === "held") return `lease is held by ${c.observed?.record.holderIdentity ?? "another candidate"}`
      const after = yield* Clock.currentTimeMillis
      if (after >= deadline) return `no successful renewal for ${Duration.format(RENEW_DEADLINE)}`
      wait = Math.min(retryMillis, deadline - after)
    }
  })

/**
 * Best effort, like client-go: an empty holder with a 1 s duration lets a standby take over at its
 * next poll instead of after a full LEASE_DURATION. A renewal cut short by the shutdown may still
 * have been applied, making our copy stale and the release conflict: then the lease is read again
 * and released from the fresh copy if it still names us (never when someone else holds it).
 */
const release = (c: Candidate) =>
  Effect.suspend(() => {
    if (!leading(c)) return Effect.void
    const lease = c.observed!.lease
    return Effect.gen(function*() {
      const now = formatMicroTime(yield* Clock.currentTimeNanos)
      const { leaseTransitions } = c.observed!.record
      const released = { holderIdentity: "", leaseDurationSeconds: 1, acquireTime: now, renewTime: now, leaseTransitions }
      const first = yield* Effect.either(write(c, lease, released))
      if (Either.isLeft(first)) {
        if (first.left.reason !== "Conflict") return yield* Effect.fail(first.left)
        const fresh = yield* c.api.get(Leases, c.namespace, c.name)
        const record = recordOf(fresh)
        if (Either.isLeft(record) || record.right.holderIdentity !== c.config.identity) {
          yield* Effect.logInfo("lease changed hands before the release; left as it is")
          return
        }
        yield* write(c, fresh, { ...released, leaseTransitions: record.right.leaseTransitions })
      }
      yield* Effect.logInfo("released leadership")
    }).pipe(
      Effect.interruptible,
      Effect.timeout(RENEW_DEADLINE),
      Effect.catchAll((e) => Effect.logWarning(`failed to release lease: ${e.message}`))
    )
  })

/** Acquire, lead until a renewal fails, again, for as long as it runs; `leader` follows. When it stops, the lease is released. */
const campaign = (c: Candidate, leader: SubscriptionRef.SubscriptionRef<boolean>) => {
  const loop: Effect.Effect<never> = Effect.gen(function*() {
    while (true) {
      const acquiredAt = yield* acquire(c)
      yield* SubscriptionRef.set(leader, true)
      yield* Effect.logInfo("became leader")
      const why = yield* renew(c, acquiredAt)
      yield* SubscriptionRef.set(leader, false)
      yield* Effect.logWarning(`lost leadership: ${why}`)
    }
  })
  // The log line tells a shutdown that hangs before the campaign stops (never logged) from one
  // that hangs in the release (logged, then neither "released" nor "failed to release").
  return Effect.ensuring(
    loop,
    Effect.logInfo("leader election stopping").pipe(Effect.zipRight(SubscriptionRef.set(leader, false)), Effect.zipRight(release(c)))
  ).pipe(Effect.annotateLogs({ identity: c.config.identity, lease: objectKey(c.namespace, c.name) }))
}

/** Builds an elector; each campaign (and the lease) lives as long as its `runWhenLeader`. */
export const make: Effect.Effect<LeaderElectionShape, never, KubeApi | ControllerConfig> = Effect.gen(function*() {
  const config = yield* ControllerConfig
  if (!config.leaderElect) {
    return {
      changes: Stream.make(true),
      runWhenLeader: <A, E, R>(work: Effect.Effect<A, E, R>) => Effect.zipRight(work, Effect.never)
    }
  }
  const api = yield* KubeApi
  const leader = yield* SubscriptionRef.make(false)
  const awaitLeadership = (value: boolean) => leader.changes.pipe(Stream.filter((v) => v === value), Stream.take(1), Stream.runDrain)

  /**
   * One term: the work in its own fiber until leadership is lost or the work fails, and, however the
   * term ends (an interrupted shutdown too), not before that fiber has stopped. Not a race of the work
   * against the loss: an interrupted race does not wait for its racers, so the lease (and the servers
   * and informers) would go while the work was still draining.
   */
  const term = <A, E, R>(work: Effect.Effect<A, E, R>): Effect.Effect<void, E, R> =>
    Effect.acquireUseRelease(
      // Forked from the acquire (uninterruptible): made interruptible, or it could never be stopped.
      Effect.forkDaemon(Effect.interruptible(Effect.zipRight(work, Effect.never))),
      (fiber) => Effect.raceFirst(Fiber.join(fiber), awaitLeadership(false)),
      (fiber) => Fiber.interrupt(fiber)
    )

  const runWhenLeader = <A, E, R>(work: Effect.Effect<A, E, R>): Effect.Effect<never, E, R> =>
    Effect.scoped(
      Effect.gen(function*() {
        yield* Effect.forkScoped(campaign({ api, config, name: config.leaseName, namespace: config.leaseNamespace, observed: undefined }, leader))
        while (true) {
          yield* awaitLeadership(true)
          yield* term(work)
        }
      })
    )

  return { changes: leader.changes, runWhenLeader }
})

export const layer: Layer.Layer<LeaderElection, never, KubeApi | ControllerConfig> = Layer.effect(LeaderElection, make)
