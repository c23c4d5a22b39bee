/**
 * The full sweep's schedule, from the first source that has one: `--reconcile-schedule`; whereabouts'
 * ConfigMap (watched); the file it is mounted at; the flat file's `reconciler_cron_expression`;
 * upstream's default. A bad expression fails the start naming its source; a bad one later keeps the
 * previous schedule, with a log line (and a Warning Event on the ConfigMap).
 */
import { readFileSync } from "node:fs"
import { Clock, Duration, Effect, Either, Option, Schedule as S, Stream, SubscriptionRef } from "effect"
import { type Schedule, ScheduleError, nextRun, parseSchedule } from "../domain/cron.ts"
import { REASON_BAD_SCHEDULE } from "../domain/events.ts"
import { DEFAULT_RECONCILER_CRON, SCHEDULE_CONFIGMAP_KEY } from "../domain/ipam-config.ts"
import { Caches, type ConfigMapRecord, toConfigMapRecord } from "../services/Caches.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { EventRecorder } from "../services/EventRecorder.ts"
import { KubeApi } from "../services/KubeApi.ts"
import { NadConfigs } from "../services/NadConfigs.ts"
import * as R from "../services/resources.ts"

export interface ActiveSchedule {
  readonly schedule: Schedule
  readonly source: string
}

/** How often the schedule file is read again (upstream watches its mount). */
export const SCHEDULE_FILE_POLL = Duration.minutes(1)

/** gocron's reading: the text trimmed; a bad one a one-line error naming its source. */
const parse = (text: string, source: string): Either.Either<ActiveSchedule, ScheduleError> =>
  Either.mapBoth(parseSchedule(text.trim()), { onLeft: (e) => new ScheduleError({ ...e, message: `${source}: ${e.message}` }), onRight: (schedule) => ({ schedule, source }) })

/** A source's schedule: undefined when its text is absent or blank, else it or why it does not parse. */
const parseIfSet = (text: string | undefined, source: string): Either.Either<ActiveSchedule | undefined, ScheduleError> =>
  text === undefined || text.trim() === "" ? Either.right(undefined) : parse(text, source)

/** The schedule file's (its absence is normal). */
const fileSchedule = (path: string) =>
  parseIfSet(path === "" ? undefined : Either.getOrUndefined(Either.try(() => readFileSync(path, "utf8"))), `schedule file ${path}`)

const configMapSchedule = (cm: ConfigMapRecord) => parseIfSet(cm.data[SCHEDULE_CONFIGMAP_KEY], `ConfigMap ${cm.namespace}/${cm.name} key ${SCHEDULE_CONFIGMAP_KEY}`)

type Sources = { readonly [source in "flag" | "configMap" | "file" | "flat"]: ActiveSchedule | undefined }

const DEFAULT: ActiveSchedule = { schedule: Either.getOrThrow(parseSchedule(DEFAULT_RECONCILER_CRON)), source: "default" }

/** The schedule the sources give, and which one gave it: the first that has one. */
export const effective = (s: Sources): ActiveSchedule => s.flag ?? s.configMap ?? s.file ?? s.flat ?? DEFAULT

/**
 * The ConfigMap, read once at start-up so the start-up line names the schedule in effect. Unreadable
 * or bad, the next source applies for now; the leader's informer (watchSchedule) reads it again, and
 * only that read records a Warning Event (two replicas starting do not both report it).
 */
const startupConfigMap = Effect.gen(function* () {
  const config = yield* ControllerConfig
  if (config.scheduleConfigMap === "") return undefined
  const api = yield* KubeApi
  const object = `${config.namespace}/${config.scheduleConfigMap}`
  const read = yield* Effect.either(api.get(R.ConfigMaps, config.namespace, config.scheduleConfigMap))
  if (Either.isLeft(read)) {
    if (read.left.reason === "NotFound") return undefined
    yield* Effect.logWarning("cannot read the sweep's schedule ConfigMap at start-up; it is read again once the caches sync").pipe(
      Effect.annotateLogs({ configMap: object, error: read.left.message })
    )
    return undefined
  }
  const parsed = configMapSchedule(toConfigMapRecord(read.right))
  if (Either.isRight(parsed)) return parsed.right
  yield* Effect.logError("the sweep's schedule in its ConfigMap does not parse; the next source applies").pipe(Effect.annotateLogs({ error: parsed.left.message }))
  return undefined
})

/**
 * The sources read at start-up. A bad flag, file or flat-file expression fails the start; the
 * ConfigMap, which can be edited while the controller runs, never does.
 */
export const startupSchedule = Effect.gen(function* () {
  const config = yield* ControllerConfig
  const nadConfigs = yield* NadConfigs
  const flagText = config.reconcileSchedule
  const flatText = nadConfigs.flatFileCron()
  const flag = flagText === undefined ? undefined : yield* parse(flagText, "--reconcile-schedule")
  return {
    flag,
    // The flag wins: no need to read it.
    configMap: flag === undefined ? yield* startupConfigMap : undefined,
    file: yield* fileSchedule(config.scheduleFile),
    flat: flatText === undefined ? undefined : yield* parse(flatText, "the flat file's reconciler_cron_expression")
  } satisfies Sources
})

/** The ConfigMap's schedule: none without the key; a bad one reported on the ConfigMap, the previous kept. */
const fromConfigMap = (cm: ConfigMapRecord | undefined, previous: ActiveSchedule | undefined) =>
  Effect.gen(function* () {
    if (cm === undefined) return undefined
    const parsed = configMapSchedule(cm)
    if (Either.isRight(parsed)) return parsed.right
    const events = yield* EventRecorder
    yield* Effect.logWarning("the sweep's schedule does not parse; the previous one stays").pipe(Effect.annotateLogs({ error: parsed.left.message, keeping: previous?.schedule.expression }))
    yield* events.record({ kind: "ConfigMap", namespace: cm.namespace, name: cm.name, uid: cm.uid }, "Warning", REASON_BAD_SCHEDULE, `${parsed.left.message}; the previous schedule stays`)
    return previous
  })

/** The schedule in effect, kept up to date from the ConfigMap and the file while the scope lives; start it once the caches are synced. */
export const watchSchedule = (initial: Sources) =>
  Effect.gen(function* () {
    const caches = yield* Caches
    const config = yield* ControllerConfig
    let sources = initial
    const current = yield* SubscriptionRef.make(effective(sources))
    const update = (next: Sources) =>
      Effect.gen(function* () {
        const before = effective(sources)
        sources = next
        const after = effective(sources)
        if (after.schedule.expression === before.schedule.expression && after.source === before.source) return
        yield* Effect.logInfo("sweep schedule changed").pipe(Effect.annotateLogs({ schedule: after.schedule.expression, source: after.source }))
        yield* SubscriptionRef.set(current, after)
      })
    const informer = caches.scheduleConfigMap
    if (informer !== undefined) {
      const events = yield* informer.subscribe
      const cm = () => Option.getOrUndefined(informer.get(config.scheduleConfigMap))
      yield* Effect.flatMap(fromConfigMap(cm(), undefined), (s) => update({ ...sources, configMap: s }))
      yield* Effect.forkScoped(Stream.runForEach(Stream.fromQueue(events), () => Effect.flatMap(fromConfigMap(cm(), sources.configMap), (s) => update({ ...sources, configMap: s }))))
    }
    const rereadFile = Effect.gen(function* () {
      const parsed = fileSchedule(config.scheduleFile)
      if (Either.isRight(parsed)) return yield* update({ ...sources, file: parsed.right })
      yield* Effect.logWarning("the sweep's schedule does not parse; the previous one stays").pipe(Effect.annotateLogs({ error: parsed.left.message }))
    })
    yield* Effect.forkScoped(Effect.repeat(rereadFile, S.spaced(SCHEDULE_FILE_POLL)))
    return current
  })

/** The longest single sleep: effect takes one beyond setTimeout's 2^31 - 1 ms as infinite (a monthly schedule would never fire). */
export const MAX_SLEEP = Duration.days(24)

/** Sleeps until the clock reads `target` (milliseconds since the epoch), in steps of ≤ MAX_SLEEP. */
const sleepUntil = (target: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    target <= now ? Effect.void : Effect.zipRight(Effect.sleep(Duration.min(Duration.millis(target - now), MAX_SLEEP)), Effect.suspend(() => sleepUntil(target)))
  )

/**
 * Runs `effect` at every activation of the schedule in effect, forever; a new schedule takes effect
 * at once. The next run counts from the previous scheduled one (as gocron: `@every` does not drift).
 */
export const onSchedule = <A, E, R>(current: SubscriptionRef.SubscriptionRef<ActiveSchedule>, effect: Effect.Effect<A, E, R>): Effect.Effect<never, E, R> =>
  Effect.gen(function* () {
    let from = yield* Clock.currentTimeMillis
    for (;;) {
      const active = yield* SubscriptionRef.get(current)
      const next = nextRun(active.schedule, new Date(from))
      // The first value `changes` gives is the current one: a change since the read wakes at once.
      const changed = Stream.runHead(Stream.filter(current.changes, (a) => a !== active))
      // Nothing to wait for (a schedule that never matches): until the schedule changes.
      const fired = Option.isNone(next) ? Effect.as(changed, false) : Effect.raceFirst(Effect.as(sleepUntil(next.value.getTime()), true), Effect.as(changed, false))
      if (yield* fired) {
        from = Option.getOrThrow(next).getTime()
        yield* effect
      } else from = yield* Clock.currentTimeMillis
    }
  })
