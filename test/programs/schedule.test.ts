/**
 * The sweep's schedule sources, in memory under TestClock: the ConfigMap whereabouts 0.9 keeps it
 * in (created, changed, changed to garbage, deleted), the flag over it, the file and the flat file
 * under it, upstream's syntax, and runs computed from the previous scheduled one.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Either, Exit, Fiber, HashMap, LogLevel, Logger, SubscriptionRef, TestClock } from "effect"
import { parseSchedule } from "../../src/domain/cron.ts"
import { type ActiveSchedule, SCHEDULE_FILE_POLL, effective, onSchedule, startupSchedule, watchSchedule } from "../../src/programs/schedule.ts"
import { Caches } from "../../src/services/Caches.ts"
import type { ControllerConfigShape } from "../../src/services/ControllerConfig.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { InMemoryCluster } from "../../src/testing/InMemoryCluster.ts"
import { memory } from "../../src/testing/layers.ts"
import { settle, settleUntil } from "../support/controller.ts"
import { eventsIn } from "../support/world.ts"

const POOLS = "kube-system"
const START = Date.parse("2026-11-03T10:00:00Z")

const configMap = (expression: string | undefined, resourceVersion?: string) => ({
  metadata: { name: "whereabouts-config", namespace: POOLS, ...(resourceVersion === undefined ? {} : { resourceVersion }) },
  data: expression === undefined ? { other: "x" } : { "cron-expression": expression }
})

/** Under TestClock from START: the schedule watched, and every run's time recorded. */
const scheduled = <A, E, R>(body: (runs: Array<string>, current: SubscriptionRef.SubscriptionRef<ActiveSchedule>) => Effect.Effect<A, E, R>, config: Partial<ControllerConfigShape> = {}) =>
  Effect.zipRight(
    TestClock.setTime(START),
    Effect.gen(function* () {
      const caches = yield* Caches
      yield* caches.awaitSynced
      const current = yield* watchSchedule(yield* startupSchedule)
      const runs: Array<string> = []
      yield* Effect.forkScoped(onSchedule(current, Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => void runs.push(new Date(t).toISOString())))))
      return yield* body(runs, current)
    }).pipe(Effect.scoped, Effect.provide(memory({ namespace: POOLS, scheduleFile: "", ...config })))
  )

const api = <A, E>(f: (k: typeof KubeApi.Service) => Effect.Effect<A, E>) => Effect.flatMap(KubeApi, f)
const sourceIs = (current: SubscriptionRef.SubscriptionRef<ActiveSchedule>, expression: string) => () =>
  Effect.map(SubscriptionRef.get(current), (a) => a.schedule.expression === expression)

describe("the sweep's schedule from the whereabouts-config ConfigMap", () => {
  it.effect("created, changed, changed to garbage (kept, with a Warning on the ConfigMap), deleted (back to the default): each takes effect without a restart", () =>
    scheduled((runs, current) =>
      Effect.gen(function* () {
        expect((yield* SubscriptionRef.get(current)).source).toBe("default")
        yield* api((k) => k.create(R.ConfigMaps, POOLS, configMap("@every 10m")))
        yield* settleUntil(sourceIs(current, "@every 10m"), "the ConfigMap's schedule")
        expect((yield* SubscriptionRef.get(current)).source).toBe("ConfigMap kube-system/whereabouts-config key cron-expression")
        yield* TestClock.adjust("21 minutes")
        expect(runs).toEqual(["2026-11-03T10:10:00.000Z", "2026-11-03T10:20:00.000Z"])

        const v1 = (yield* api((k) => k.get(R.ConfigMaps, POOLS, "whereabouts-config"))).metadata.resourceVersion
        yield* api((k) => k.replace(R.ConfigMaps, POOLS, configMap("CRON_TZ=Europe/Berlin 0 12 * * *", v1)))
        yield* settleUntil(sourceIs(current, "CRON_TZ=Europe/Berlin 0 12 * * *"), "the changed schedule")
        // 10:21 UTC → noon in Berlin is 11:00 UTC.
        yield* TestClock.adjust("40 minutes")
        expect(runs.slice(2)).toEqual(["2026-11-03T11:00:00.000Z"])

        const v2 = (yield* api((k) => k.get(R.ConfigMaps, POOLS, "whereabouts-config"))).metadata.resourceVersion
        yield* api((k) => k.replace(R.ConfigMaps, POOLS, configMap("every tuesday at noon", v2)))
        yield* settleUntil(() => Effect.map(eventsIn(POOLS), (e) => e.some((x) => x.reason === "InvalidReconcileSchedule")), "a Warning on the ConfigMap")
        const [warning] = (yield* eventsIn(POOLS)).filter((e) => e.reason === "InvalidReconcileSchedule")
        expect(warning).toMatchObject({ type: "Warning", name: "whereabouts-config" })
        expect(warning!.message).toMatch(/^ConfigMap kube-system\/whereabouts-config key cron-expression: invalid cron expression "every tuesday at noon": .*; the previous schedule stays$/)
        expect((yield* SubscriptionRef.get(current)).schedule.expression).toBe("CRON_TZ=Europe/Berlin 0 12 * * *")

        yield* api((k) => k.delete(R.ConfigMaps, POOLS, "whereabouts-config"))
        yield* settleUntil(sourceIs(current, "30 4 * * *"), "back to the default")
        expect((yield* SubscriptionRef.get(current)).source).toBe("default")
      })
    ))

  it.effect("the flag wins over the ConfigMap", () =>
    scheduled((_, current) =>
      Effect.gen(function* () {
        yield* api((k) => k.create(R.ConfigMaps, POOLS, configMap("@hourly")))
        yield* settle
        expect(yield* SubscriptionRef.get(current)).toMatchObject({ source: "--reconcile-schedule", schedule: { expression: "@daily" } })
      }),
      { reconcileSchedule: "@daily" }
    ))

  it.effect("a ConfigMap without the key leaves the next source in effect", () =>
    scheduled((_, current) =>
      Effect.gen(function* () {
        yield* api((k) => k.create(R.ConfigMaps, POOLS, configMap(undefined)))
        yield* settle
        expect((yield* SubscriptionRef.get(current)).source).toBe("default")
      })
    ))
})

describe("the sweep's schedule ConfigMap read at start-up (GET, before the caches sync)", () => {
  /** The start-up sources with a ConfigMap (or none) in place, and the log lines at warning or above. */
  const atStartup = (cm: ReturnType<typeof configMap> | undefined, config: Partial<ControllerConfigShape> = {}, fault?: "Forbidden") => {
    const lines: Array<string> = []
    const logger = Logger.make(({ logLevel, message, annotations }) => {
      if (logLevel.ordinal >= LogLevel.Warning.ordinal) lines.push(`${logLevel.label} ${[message].flat().join(" ")} ${JSON.stringify(Object.fromEntries(HashMap.toEntries(annotations)))}`)
    })
    return Effect.gen(function* () {
      if (cm !== undefined) yield* api((k) => k.create(R.ConfigMaps, POOLS, cm))
      if (fault !== undefined) (yield* InMemoryCluster).injectFault({ resource: "configmaps", verb: "get", reason: fault })
      const sources = yield* startupSchedule.pipe(Effect.provide(Logger.add(logger)))
      return { sources, lines, events: yield* eventsIn(POOLS) }
    }).pipe(Effect.provide(memory({ namespace: POOLS, scheduleFile: "", ...config })))
  }

  it.effect("a good one is the schedule in effect at once; none, or one without the key, leaves the next source", () =>
    Effect.gen(function* () {
      const good = yield* atStartup(configMap("@every 2h"))
      expect(effective(good.sources)).toMatchObject({ source: "ConfigMap kube-system/whereabouts-config key cron-expression", schedule: { expression: "@every 2h" } })
      expect(good.lines).toEqual([])
      expect(effective((yield* atStartup(undefined)).sources).source).toBe("default")
      expect(effective((yield* atStartup(configMap(undefined))).sources).source).toBe("default")
      // The flag wins, and then the ConfigMap is not read at all.
      expect(effective((yield* atStartup(configMap("@every 2h"), { reconcileSchedule: "@hourly" })).sources).source).toBe("--reconcile-schedule")
    }))

  it.effect("a bad one is one error line naming it, the next source applies, and no Event yet (the leader's watch writes it)", () =>
    Effect.gen(function* () {
      const bad = yield* atStartup(configMap("every other day"))
      expect(effective(bad.sources).source).toBe("default")
      expect(bad.lines).toHaveLength(1)
      expect(bad.lines[0]).toMatch(/^ERROR the sweep's schedule in its ConfigMap does not parse; the next source applies .*ConfigMap kube-system\/whereabouts-config key cron-expression: /)
      expect(bad.events).toEqual([])
    }))

  it.effect("one that cannot be read (Forbidden) is a warning naming it, and the start goes on with the next source", () =>
    Effect.gen(function* () {
      const forbidden = yield* atStartup(configMap("@every 2h"), {}, "Forbidden")
      expect(effective(forbidden.sources).source).toBe("default")
      expect(forbidden.lines).toHaveLength(1)
      expect(forbidden.lines[0]).toContain("WARN cannot read the sweep's schedule ConfigMap at start-up")
      expect(forbidden.lines[0]).toContain('"configMap":"kube-system/whereabouts-config"')
    }))
})

describe("the sweep's schedule: file, flat file, start-up errors", () => {
  it.effect("the mounted file (trimmed, as gocron reads it) under the ConfigMap; a bad flag fails the start with one line naming it", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wac-schedule-"))
      const file = path.join(dir, "config")
      fs.writeFileSync(file, "  @every 1h\n")
      try {
        const fromFile = yield* startupSchedule.pipe(Effect.provide(memory({ scheduleFile: file })))
        expect(fromFile.file).toMatchObject({ source: `schedule file ${file}`, schedule: { expression: "@every 1h" } })
        const bad = yield* Effect.exit(startupSchedule.pipe(Effect.provide(memory({ reconcileSchedule: "61 * * * *" }))))
        expect(Exit.isFailure(bad) && String(Exit.isFailure(bad) ? bad.cause : "")).toContain('--reconcile-schedule: invalid cron expression "61 * * * *": minute 61 is above 59')
        fs.writeFileSync(file, "@every")
        const badFile = yield* Effect.exit(startupSchedule.pipe(Effect.provide(memory({ scheduleFile: file }))))
        expect(Exit.isFailure(badFile) && String(badFile.cause)).toContain(`schedule file ${file}: invalid cron expression "@every"`)
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    }))

  it.effect("the file is read again every minute: a change takes effect, a bad one keeps the previous, its removal falls back", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wac-schedule-"))
    const file = path.join(dir, "config")
    fs.writeFileSync(file, "@every 1h")
    return scheduled(
      (_, current) =>
        Effect.gen(function* () {
          expect((yield* SubscriptionRef.get(current)).schedule.expression).toBe("@every 1h")
          fs.writeFileSync(file, "@every 5m")
          yield* TestClock.adjust(SCHEDULE_FILE_POLL)
          yield* settleUntil(sourceIs(current, "@every 5m"), "the changed file")
          fs.writeFileSync(file, "@every")
          yield* TestClock.adjust(SCHEDULE_FILE_POLL)
          yield* settle
          expect((yield* SubscriptionRef.get(current)).schedule.expression).toBe("@every 5m")
          fs.rmSync(file)
          yield* TestClock.adjust(SCHEDULE_FILE_POLL)
          yield* settleUntil(sourceIs(current, "30 4 * * *"), "the default once the file is gone")
        }),
      { scheduleFile: file }
    ).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))))
  })

  it.effect("the flat file's reconciler_cron_expression, in upstream's syntax", () =>
    Effect.gen(function* () {
      const sources = yield* startupSchedule.pipe(
        Effect.provide(memory({ scheduleFile: "" }, { flatFiles: { "/etc/cni/net.d/whereabouts.d/whereabouts.conf": { reconciler_cron_expression: "@midnight" } } }))
      )
      expect(sources.flat).toMatchObject({ source: "the flat file's reconciler_cron_expression", schedule: { expression: "@midnight" } })
    }))
})

describe("onSchedule", () => {
  it.effect("@every runs from the previous scheduled run, not from when a slow sweep ended (no drift)", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(START)
      const current = yield* SubscriptionRef.make({ schedule: Either.getOrThrow(parseSchedule("@every 10m")), source: "test" })
      const runs: Array<string> = []
      // Each run takes 3 minutes.
      const slow = Effect.zipRight(Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => void runs.push(new Date(t).toISOString()))), Effect.sleep("3 minutes"))
      const fiber = yield* Effect.fork(onSchedule(current, slow))
      for (let i = 0; i < 31; i++) yield* TestClock.adjust("1 minute")
      yield* Fiber.interrupt(fiber)
      expect(runs).toEqual(["2026-11-03T10:10:00.000Z", "2026-11-03T10:20:00.000Z", "2026-11-03T10:30:00.000Z"])
    }))

  it.effect("a schedule that never matches waits for the next schedule instead of spinning", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(START)
      const current = yield* SubscriptionRef.make({ schedule: Either.getOrThrow(parseSchedule("0 0 30 2 *")), source: "test" })
      const runs: Array<number> = []
      const fiber = yield* Effect.fork(onSchedule(current, Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => void runs.push(t)))))
      yield* TestClock.adjust("400 days")
      expect(runs).toEqual([])
      yield* SubscriptionRef.set(current, { schedule: Either.getOrThrow(parseSchedule("@every 1h")), source: "test" })
      yield* TestClock.adjust("61 minutes")
      expect(runs).toHaveLength(1)
      yield* Fiber.interrupt(fiber)
    }))
})
