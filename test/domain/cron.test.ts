/**
 * parseSchedule and nextRun against robfig/cron v3 itself: fixtures/robfig-cron-golden.json is what
 * upstream's ParseStandard and Next answer for a corpus and 300 generated expressions. Regenerate
 * it (Go and the module proxy needed) from the repository root with
 *   go -C scripts/cron-golden run . > test/domain/fixtures/robfig-cron-golden.json
 * Then properties: activations are strictly later and match, and where effect's Cron has robfig's
 * semantics (no daylight-saving change, the common syntax) both give the same instants.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cron, Duration, Either, FastCheck as fc, Option } from "effect"
import { readFileSync } from "node:fs"
import { type Schedule, ScheduleError, nextRun, parseSchedule } from "../../src/domain/cron.ts"
import { parseGoDuration } from "../../src/domain/go-duration.ts"

interface GoldenCase {
  readonly expression: string
  readonly error?: string
  readonly panicked?: boolean
  /** Start instant → the activations chained from it; null where Next gave the zero time. */
  readonly runs?: Readonly<Record<string, ReadonlyArray<string | null>>>
}
interface Golden {
  readonly generator: string
  readonly cases: ReadonlyArray<GoldenCase>
  readonly durations: ReadonlyArray<{ readonly text: string; readonly nanos?: string; readonly error?: string }>
}
const golden: Golden = JSON.parse(readFileSync(new URL("./fixtures/robfig-cron-golden.json", import.meta.url), "utf8"))

/**
 * Where we knowingly answer otherwise. ICU (our zone database) matches link names in any case and
 * keeps no record of their spelling; Go opens a file, case-sensitively. Canonical names are checked.
 */
const KNOWN_DIFFERENCES: ReadonlyMap<string, "accepted"> = new Map([["CRON_TZ=US/EASTERN 0 0 * * *", "accepted"]])

const parsed = (text: string): Schedule => Either.getOrThrowWith(parseSchedule(text), (e) => new Error(e.message))
const failure = (text: string): ScheduleError => Either.getOrThrowWith(Either.flip(parseSchedule(text)), () => new Error(`${text} parsed`))

/** Activations chained from `start`, ending with null where there is none, as the golden file has them. */
const chain = (schedule: Schedule, start: string, count: number): Array<string | null> => {
  const out: Array<string | null> = []
  let t = new Date(start)
  while (out.length < count) {
    const next = nextRun(schedule, t)
    if (Option.isNone(next)) return [...out, null]
    t = next.value
    out.push(t.toISOString())
  }
  return out
}

describe("parseSchedule and nextRun match robfig/cron v3 (golden file)", () => {
  it("the golden file is robfig/cron v3.0.1's and covers both answers", () => {
    expect(golden.generator).toContain("github.com/robfig/cron/v3 v3.0.1")
    expect(golden.cases.filter((c) => c.error === undefined).length).toBeGreaterThan(250)
    expect(golden.cases.filter((c) => c.error !== undefined).length).toBeGreaterThan(150)
  })

  it.each(golden.cases.filter((c) => c.error !== undefined && !KNOWN_DIFFERENCES.has(c.expression)).map((c) => [c.expression, c.error] as const))(
    "rejects %j (robfig: %s)",
    (expression) => {
      const error = failure(expression)
      expect(error).toBeInstanceOf(ScheduleError)
      expect(error.expression).toBe(expression)
    }
  )

  it.each(golden.cases.filter((c) => c.runs !== undefined).map((c) => [c.expression, c.runs!] as const))("accepts %j with robfig's activations", (expression, runs) => {
    const schedule = parsed(expression)
    for (const [start, expected] of Object.entries(runs)) {
      expect({ start, runs: chain(schedule, start, expected.length) }).toEqual({ start, runs: expected })
    }
  })

  it.each(golden.durations.map((d) => [d.text, d] as const))("Go duration %j", (_, d) => {
    const ours = parseGoDuration(d.text)
    if (d.nanos === undefined) expect(Either.isLeft(ours)).toBe(true)
    else expect(ours).toEqual(Either.right(BigInt(d.nanos)))
  })

  it("the known differences are still what they are documented as", () => {
    for (const [expression, ours] of KNOWN_DIFFERENCES) {
      expect(golden.cases.find((c) => c.expression === expression)?.error).toBeDefined()
      expect(Either.isRight(parseSchedule(expression))).toBe(ours === "accepted")
    }
  })
})

describe("what a schedule holds", () => {
  it("a plain expression is an effect Cron in UTC, equal to effect's own parse", () => {
    const s = parsed("30 4 * * *")
    expect(s).toMatchObject({ _tag: "Cron", expression: "30 4 * * *", timeZone: "UTC" })
    expect(s._tag === "Cron" && Cron.equals(s.cron, Cron.unsafeParse("30 4 * * *", "UTC"))).toBe(true)
  })

  it.each([
    ["CRON_TZ=Europe/Berlin 30 2 * * *", "Europe/Berlin"],
    ["TZ=America/New_York @daily", "America/New_York"],
    ["TZ= 0 0 * * *", "UTC"],
    ["CRON_TZ=Local 0 0 * * *", "UTC"]
  ])("%j is matched in %s", (expression, timeZone) => {
    expect(parsed(expression)).toMatchObject({ _tag: "Cron", timeZone })
  })

  it.each([
    ["@every 1h30m", 5400],
    ["@every 90s", 90],
    ["@every 500ms", 1],
    ["@every 1.9s", 1],
    ["@every 0", 1],
    ["@every -1h", 1],
    ["@every 2562047h47m16.854775807s", 9223372036]
  ])("%j runs every %d s (whole seconds, at least one)", (expression, seconds) => {
    const s = parsed(expression)
    expect(s._tag === "Every" && Duration.toSeconds(s.interval)).toBe(seconds)
  })

  it.each([
    ["0 0 30 2 *", "no month it allows has day 30"],
    ["0 0 31 4,6,9,11 *", "no month it allows has day 31"],
    [", * * * *", "the minute field lists no values"],
    ["0 0 , * *", "the day-of-month field lists no values"],
    ["0 0 , * ,", "the day-of-month and day-of-week fields list no values"]
  ])("%j is accepted but never runs: %s", (expression, reason) => {
    expect(parsed(expression)).toEqual({ _tag: "Never", expression, timeZone: "UTC", reason })
    expect(nextRun(parsed(expression), new Date("2026-01-01T00:00:00Z"))).toEqual(Option.none())
  })

  it("an empty day-of-month list leaves day-of-week alone (robfig ORs them), and the other way round", () => {
    expect(chain(parsed("0 0 , * 1"), "2026-01-01T00:00:00Z", 2)).toEqual(["2026-01-05T00:00:00.000Z", "2026-01-12T00:00:00.000Z"])
    expect(chain(parsed("0 0 15 * ,"), "2026-01-01T00:00:00Z", 2)).toEqual(["2026-01-15T00:00:00.000Z", "2026-02-15T00:00:00.000Z"])
  })
})

describe("error messages: one line, naming what is wrong", () => {
  it.each([
    ["61 * * * *", "minute 61 is above 59"],
    ["* * 0 * *", "day-of-month 0 is below 1"],
    ["0 0 * * 7", "day-of-week 7 is above 6 (Sunday is 0)"],
    ["5-3 * * * *", `minute range "5-3" runs backwards`],
    ["*/0 * * * *", `minute step 0 in "*/0" must be at least 1`],
    ["0 0 1 sun *", `month "sun" is not a number or a month name (jan-dec)`],
    ["0 0 * * 1#2", `day-of-week "1#2" is not a number or a day name (sun-sat)`],
    ["- * * * *", `minute "-" is missing a number`],
    ["30\ufeff4 * * * *", `minute "30\\ufeff4" is not a number`],
    ["0 0 0 * * *", "expected 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily, found 6 (robfig's standard parser has no seconds field)"],
    ["", "it is empty"],
    ["@reboot", `unknown descriptor "@reboot" (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)`],
    ["@Daily", `unknown descriptor "@Daily" (write @daily: no spaces, lower case)`],
    ["@every 1d", `@every needs a Go duration such as 1h30m: unknown unit "d" in "1d" (units are ns, us, ms, s, m, h)`],
    ["@every 2562048h", `@every needs a Go duration such as 1h30m: "2562048h" is out of range (at most 2562047h47m16.854775807s)`],
    ["CRON_TZ=Mars/Olympus 0 0 * * *", `unknown time zone "Mars/Olympus"`],
    ["CRON_TZ=europe/berlin 0 0 * * *", `unknown time zone "europe/berlin" (names are case-sensitive: Europe/Berlin)`],
    ["TZ=UTC", `the time zone prefix "TZ=UTC" must be followed by a space and the schedule`]
  ])("%j: %s", (expression, detail) => {
    expect(failure(expression).message).toBe(`invalid cron expression ${JSON.stringify(expression).replace("\ufeff", "\\ufeff")}: ${detail}`)
  })

  it("reasons say which part failed", () => {
    expect([
      failure("").reason,
      failure("* * *").reason,
      failure("61 * * * *").reason,
      failure("@foo").reason,
      failure("@every x").reason,
      failure("TZ=Nowhere/Else * * * * *").reason
    ]).toEqual(["Empty", "FieldCount", "InvalidField", "UnknownDescriptor", "InvalidInterval", "InvalidTimeZone"])
  })

  it.prop("never throws; a failure is one line quoting the expression", [fc.oneof(fc.string({ unit: "grapheme" }), fc.stringMatching(/^(CRON_TZ=\S* )?[-*?/,0-9a-z@ \t]{0,30}$/))], ([text]) => {
    const result = parseSchedule(text)
    if (Either.isLeft(result)) {
      expect(result.left.message.startsWith("invalid cron expression \"")).toBe(true)
      expect(result.left.message).not.toMatch(/[\n\r\u0085\u2028\u2029]/)
    }
  })
})

describe("where effect's Cron differs from robfig (why parseSchedule translates)", () => {
  const effectRuns = (expression: string, timeZone: string, start: string, count: number) => {
    const cron = Cron.unsafeParse(expression, timeZone)
    const out: Array<string> = []
    let t = new Date(start)
    while (out.length < count) out.push((t = Cron.next(cron, t)).toISOString())
    return out
  }
  const start = "2026-01-01T00:00:00Z"

  it("a stepped day-of-month `*/2` with a day of week: robfig ORs them, effect ANDs them", () => {
    expect(chain(parsed("0 0 */2 * 1"), start, 3)).toEqual(["2026-01-03T00:00:00.000Z", "2026-01-05T00:00:00.000Z", "2026-01-07T00:00:00.000Z"])
    expect(effectRuns("0 0 */2 * 1", "UTC", start, 2)).toEqual(["2026-01-05T00:00:00.000Z", "2026-01-19T00:00:00.000Z"])
  })

  it("a `*` later in the list (`1,*`): robfig ANDs (so only the day of week counts), effect ORs", () => {
    expect(chain(parsed("0 0 1,* * 1"), start, 2)).toEqual(["2026-01-05T00:00:00.000Z", "2026-01-12T00:00:00.000Z"])
    expect(effectRuns("0 0 1,* * 1", "UTC", start, 2)).toEqual(["2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"])
  })

  it("an open-ended day-of-week step `1/2` ends at Saturday in robfig; effect's runs on to 7, Sunday", () => {
    expect(chain(parsed("0 0 * * 1/2"), start, 4)).toEqual(["2026-01-02T00:00:00.000Z", "2026-01-05T00:00:00.000Z", "2026-01-07T00:00:00.000Z", "2026-01-09T00:00:00.000Z"])
    expect(effectRuns("0 0 * * 1/2", "UTC", start, 2)).toEqual(["2026-01-02T00:00:00.000Z", "2026-01-04T00:00:00.000Z"])
  })

  it("syntax only robfig accepts: ?, descriptors, steps beyond the field, a leading +, `*-n`, empty list items", () => {
    for (const e of ["* * * * ?", "@daily", "*/100 * * * *", "+5 * * * *", "*-5 * * * *", "1,,2 * * * *"]) {
      expect([e, Either.isRight(parseSchedule(e)), Either.isRight(Cron.parse(e, "UTC"))]).toEqual([e, true, false])
    }
  })

  it("syntax only effect accepts: a seconds field, day-of-week 7, offset zones", () => {
    for (const [e, zone] of [["0 0 0 * * *", "UTC"], ["0 0 * * 7", "UTC"], ["0 0 * * *", "+01:00"]] as const) {
      const prefixed = zone === "UTC" ? e : `CRON_TZ=${zone} ${e}`
      expect([prefixed, Either.isRight(parseSchedule(prefixed)), Either.isRight(Cron.parse(e, zone))]).toEqual([prefixed, false, true])
    }
  })

  it("zone names effect's Cron.parse misreads as offsets (GMT) are robfig's zones", () => {
    expect(Either.isLeft(Cron.parse("0 0 * * *", "GMT"))).toBe(true)
    expect(chain(parsed("CRON_TZ=GMT 0 0 * * *"), start, 1)).toEqual(["2026-01-02T00:00:00.000Z"])
  })

  it("daylight saving: robfig skips a wall time that does not exist and runs a repeated one twice", () => {
    const spring = "2026-03-28T12:00:00Z"
    const autumn = "2026-10-24T12:00:00Z"
    expect(chain(parsed("CRON_TZ=Europe/Berlin 30 2 * * *"), spring, 1)).toEqual(["2026-03-30T00:30:00.000Z"])
    expect(effectRuns("30 2 * * *", "Europe/Berlin", spring, 1)).toEqual(["2026-03-29T01:30:00.000Z"])
    expect(chain(parsed("CRON_TZ=Europe/Berlin 30 2 * * *"), autumn, 2)).toEqual(["2026-10-25T00:30:00.000Z", "2026-10-25T01:30:00.000Z"])
    expect(effectRuns("30 2 * * *", "Europe/Berlin", autumn, 2)).toEqual(["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"])
  })

  it.each([
    ["Europe/Berlin", "2026-10-25T01:45:22Z", "2026-10-25T00:46:00.000Z"],
    ["America/New_York", "2026-11-01T06:45:22Z", "2026-11-01T05:46:00.000Z"],
    ["Australia/Lord_Howe", "2026-04-04T15:10:00Z", "2026-04-04T14:41:00.000Z"],
    ["America/Santiago", "2026-04-05T03:30:00Z", "2026-04-05T02:31:00.000Z"],
    ["Asia/Gaza", "2026-10-23T23:30:00Z", "2026-10-23T22:31:00.000Z"]
  ])("from the second pass of %s's repeated hour (%s) effect's next minute is the first pass's, before the start; robfig's is a minute on", (zone, after, effect) => {
    const start = new Date(after)
    expect(Cron.next(Cron.unsafeParse("* * * * *", zone), start).toISOString()).toBe(effect)
    expect(chain(parsed(`CRON_TZ=${zone} * * * * *`), after, 1)).toEqual([new Date(Math.floor(start.getTime() / 60_000 + 1) * 60_000).toISOString()])
  })

  it("robfig searches five years at most: a leap-day schedule started in 2097 has no next run (2104 is too far)", () => {
    expect(nextRun(parsed("0 0 29 2 *"), new Date("2097-03-01T00:00:00Z"))).toEqual(Option.none())
    expect(effectRuns("0 0 29 2 *", "UTC", "2097-03-01T00:00:00Z", 1)).toEqual(["2104-02-29T00:00:00.000Z"])
  })
})

// Expressions in the syntax both parsers share with the same meaning: day-of-month and
// day-of-week are "*" or lists without a star, steps stay within the field, and day-of-week has no
// open-ended `n/step` (effect's day-of-week runs to 7, Sunday again).
const common = (min: number, max: number, star: boolean, openEnded = true): fc.Arbitrary<string> => {
  const value = fc.integer({ min, max })
  const step = fc.integer({ min: 1, max })
  const item = fc.oneof(
    value.map(String),
    fc.tuple(value, value).map(([a, b]) => `${Math.min(a, b)}-${Math.max(a, b)}`),
    fc.tuple(value, value, step).map(([a, b, s]) => `${Math.min(a, b)}-${Math.max(a, b)}/${s}`),
    ...(openEnded ? [fc.tuple(value, step).map(([a, s]) => `${a}/${s}`)] : []),
    ...(star ? [fc.constant("*"), step.map((s) => `*/${s}`)] : [])
  )
  return fc.array(item, { minLength: 1, maxLength: 3 }).map((items) => items.join(","))
}
const commonExpression = fc
  .tuple(
    common(0, 59, true),
    common(0, 23, true),
    fc.oneof(fc.constant("*"), common(1, 31, false)),
    fc.oneof(fc.constant("*"), common(1, 12, true)),
    fc.oneof(fc.constant("*"), common(0, 6, false, false))
  )
  .map((fields) => fields.join(" "))

// Anything robfig's syntax allows, quirks included.
const quirky = (min: number, max: number): fc.Arbitrary<string> => {
  const value = fc.integer({ min, max })
  const item = fc.oneof(
    common(min, max, true),
    fc.constantFrom("*", "?", "*/1", "?/3", "", `*-${max}`),
    fc.tuple(fc.constantFrom("*", "?"), fc.integer({ min: 1, max: 100 })).map(([s, n]) => `${s}/${n}`),
    fc.tuple(value, fc.integer({ min: 1, max: 100 })).map(([a, n]) => `${a}/${n}`)
  )
  return fc.array(item, { minLength: 1, maxLength: 3 }).map((items) => items.join(",") || ",")
}
const quirkyExpression = fc.tuple(quirky(0, 59), quirky(0, 23), quirky(1, 31), quirky(1, 12), quirky(0, 6)).map((fields) => fields.join(" "))

const instant = fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2090, 0, 1) }).map((ms) => new Date(ms))
const FIXED_ZONES = ["UTC", "Etc/GMT-5", "Etc/GMT+3", "Asia/Kolkata", "Asia/Kathmandu"] as const
const DST_ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Havana"] as const

describe("properties", () => {
  it.prop(
    "without daylight-saving changes, nextRun gives effect's Cron.next for the syntax both share",
    [commonExpression, fc.constantFrom(...FIXED_ZONES), instant],
    ([expression, zone, after]) => {
      const schedule = parsed(`CRON_TZ=${zone} ${expression}`)
      fc.pre(schedule._tag === "Cron")
      const ours = nextRun(schedule, after)
      const theirs = Cron.next(Cron.unsafeParse(expression, zone), after)
      // robfig gives up after the fifth calendar year; effect does not.
      if (Option.isNone(ours)) expect(theirs.getUTCFullYear()).toBeGreaterThan(after.getUTCFullYear() + 4)
      else expect(ours.value.toISOString()).toBe(theirs.toISOString())
    }
  )

  it.prop(
    "robfig's wall-clock walk and effect's Cron agree at offset zero, for all of robfig's syntax",
    [quirkyExpression, instant],
    ([expression, after]) => {
      // Africa/Abidjan has been UTC+0 since 1912: a named zone's walk, against effect's Cron.next on the
      // UTC schedule's sets, cut off as robfig is after the fifth calendar year.
      const schedule = parsed(expression)
      const walk = chain(parsed(`CRON_TZ=Africa/Abidjan ${expression}`), after.toISOString(), 3)
      const effect: Array<string | null> = schedule._tag === "Cron" ? [] : [null]
      for (let t = after; schedule._tag === "Cron" && effect.length < 3 && effect.at(-1) !== null; ) {
        const next = Cron.next(schedule.cron, t)
        const ok = next.getUTCFullYear() <= new Date(Math.floor(t.getTime() / 1000) * 1000 + 1000).getUTCFullYear() + 5
        effect.push(ok ? (t = next).toISOString() : null)
      }
      expect(walk).toEqual(effect)
    }
  )

  it.prop(
    "an activation is strictly later, on a whole second, and matches the schedule's fields in its zone",
    [quirkyExpression, fc.constantFrom(...DST_ZONES), instant],
    ([expression, zone, after]) => {
      const schedule = parsed(`CRON_TZ=${zone} ${expression}`)
      const next = nextRun(schedule, after)
      if (schedule._tag !== "Cron" || Option.isNone(next)) return
      expect(next.value.getTime()).toBeGreaterThan(after.getTime())
      expect(next.value.getTime() % 1000).toBe(0)
      expect(Cron.match(schedule.cron, next.value)).toBe(true)
    }
  )

  it.prop(
    "without daylight-saving changes no matching minute is skipped",
    [quirkyExpression, fc.constantFrom(...FIXED_ZONES), instant],
    ([expression, zone, after]) => {
      const schedule = parsed(`CRON_TZ=${zone} ${expression}`)
      const next = nextRun(schedule, after)
      fc.pre(schedule._tag === "Cron" && Option.isSome(next) && next.value.getTime() - after.getTime() < 2 * 86_400_000)
      if (schedule._tag !== "Cron" || Option.isNone(next)) return
      for (let m = Math.floor(after.getTime() / 60_000 + 1) * 60_000; m < next.value.getTime(); m += 60_000) {
        expect(Cron.match(schedule.cron, new Date(m))).toBe(false)
      }
    }
  )

  it.prop(
    "@every: the interval after the start's whole second, in whole seconds, at least one",
    [fc.integer({ min: -5_000, max: 100_000_000 }), fc.constantFrom("ms", "s", "m"), instant],
    ([amount, unit, after]) => {
      const schedule = parsed(`@every ${amount}${unit}`)
      const ms = amount * (unit === "ms" ? 1 : unit === "s" ? 1_000 : 60_000)
      const interval = Math.max(1_000, ms - (ms % 1_000))
      expect(schedule._tag === "Every" && Duration.toMillis(schedule.interval)).toBe(interval)
      const next = Option.getOrThrow(nextRun(schedule, after))
      expect(next.getTime()).toBe(Math.floor(after.getTime() / 1_000) * 1_000 + interval)
    }
  )
})

describe("what the schedule costs to keep", () => {
  it("a UTC schedule keeps its zone as a fixed offset: a named zone is an Intl.DateTimeFormat, and the first maps ICU's data into memory", () => {
    for (const text of ["30 4 * * *", "CRON_TZ=UTC 0 0 * * 1", "TZ=Local @daily", "TZ= 5 * * * *"]) {
      const schedule = Either.getOrThrow(parseSchedule(text))
      expect(schedule._tag).toBe("Cron")
      if (schedule._tag !== "Cron") continue
      const zone = Option.getOrThrow(schedule.cron.tz)
      expect(zone._tag === "Offset" && zone.offset).toBe(0)
      expect(schedule.timeZone).toBe("UTC")
    }
    const zoned = Either.getOrThrow(parseSchedule("CRON_TZ=Europe/Berlin 0 3 * * *"))
    expect(zoned._tag === "Cron" && Option.getOrThrow(zoned.cron.tz)._tag).toBe("Named")
  })
})
