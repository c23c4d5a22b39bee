/**
 * The sweep's schedule in whereabouts' syntax: exactly what robfig/cron v3's `ParseStandard` accepts
 * (five fields, `?`, names, `@daily`-style descriptors, `@every <Go duration>`, a `CRON_TZ=`/`TZ=`
 * prefix), with activations at the instants robfig's `Next` gives (its own walk, robfig-next.ts:
 * effect's `Cron.next` differs across daylight-saving changes). test/domain/cron.test.ts holds both
 * to a golden file upstream's code generated.
 *
 * whereabouts 0.9 reaches ParseStandard through gocron v2, whose three rules are left to the caller:
 * the text is trimmed; without a zone prefix it is parsed as `CRON_TZ=UTC <text>` (so spaces around
 * a descriptor are trimmed too); a schedule with no next run (`Never`, or none from `nextRun`) is refused.
 */
import { Cron, Data, DateTime, Duration, Either, Option } from "effect"
import { parseFields, quote } from "./cron-fields.ts"
import { parseGoDuration } from "./go-duration.ts"
import { robfigNext } from "./robfig-next.ts"

export type ScheduleErrorReason = "Empty" | "FieldCount" | "InvalidField" | "UnknownDescriptor" | "InvalidInterval" | "InvalidTimeZone"

export class ScheduleError extends Data.TaggedError("ScheduleError")<{
  readonly reason: ScheduleErrorReason
  readonly expression: string
  readonly message: string
}> {}

/**
 * A parsed schedule, `expression` as written. Cron: matched in `timeZone`, the prefix's zone, else
 * UTC (robfig's process zone, UTC in whereabouts' image). Every: robfig's ConstantDelaySchedule, whole
 * seconds, at least one. Never: accepted by robfig, but no instant can ever match (`0 0 30 2 *`, an empty list `,`).
 */
export type Schedule = { readonly expression: string } & (
  | { readonly _tag: "Cron"; readonly timeZone: string; readonly cron: Cron.Cron }
  | { readonly _tag: "Every"; readonly interval: Duration.Duration }
  | { readonly _tag: "Never"; readonly timeZone: string; readonly reason: string }
)

/** robfig's descriptors, as the five fields they stand for. */
const DESCRIPTORS: ReadonlyMap<string, string> = new Map(Object.entries({
  "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"
}))
const EVERY = "@every "

// Go's unicode.IsSpace, which strings.Fields and TrimSpace use (unlike JS's \s: U+0085 in, U+FEFF out).
const GO_SPACES = "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
const GO_FIELD_SEPARATOR = new RegExp(`[${GO_SPACES}]+`)
const GO_TRIM = new RegExp(`^[${GO_SPACES}]+|[${GO_SPACES}]+$`, "g")

// UTC as a fixed offset: the first named zone (an Intl.DateTimeFormat) brings ICU's data into resident memory.
const UTC = DateTime.zoneMakeOffset(0)

// Zone names ICU resolves that Go's LoadLocation rejects (no IANA file): Java's ids, SystemV/*, dropped links.
const ICU_ONLY_ZONES = new Set([
  ...["ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST", "CTT", "EAT", "ECT", "IET", "IST", "JST"],
  ...["MIT", "NET", "NST", "PLT", "PNT", "PRT", "PST", "SST", "VST", "US/Pacific-New", "Canada/East-Saskatchewan"]
])

/** Go's time.LoadLocation: "" and "UTC" are UTC, "Local" the process's zone (UTC here too); names are case-sensitive. */
const loadZone = (name: string): Either.Either<DateTime.TimeZone, string> => {
  if (name === "" || name === "UTC" || name === "Local") return Either.right(UTC)
  const unknown = Either.left(`unknown time zone ${quote(name)}`)
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(name) || ICU_ONLY_ZONES.has(name) || name.startsWith("SystemV/")) return unknown
  const zone = DateTime.zoneMakeNamed(name)
  if (Option.isNone(zone)) return unknown
  // ICU matches any case and answers its own id; Go opens a file. A name ICU keeps must be spelled as
  // ICU spells it; an alias (no spelling kept) must at least capitalise each part, as IANA names do.
  const id = zone.value.id
  const same = id.toLowerCase() === name.toLowerCase()
  if (same ? id !== name : !name.split("/").every((part) => /^[A-Z]/.test(part))) {
    return Either.left(`unknown time zone ${quote(name)} (names are case-sensitive${same ? `: ${id}` : ""})`)
  }
  return Either.right(zone.value)
}

const descriptorHint = (text: string): string => {
  const known = [...DESCRIPTORS.keys()].find((d) => d === text.replace(GO_TRIM, "").toLowerCase())
  return known === undefined ? "@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>" : `write ${known}: no spaces, lower case`
}

/** Parses a schedule exactly as robfig/cron v3's ParseStandard does (whereabouts' reconciler syntax). */
export const parseSchedule = (text: string): Either.Either<Schedule, ScheduleError> => {
  const fail = (reason: ScheduleErrorReason, detail: string) =>
    Either.left(new ScheduleError({ reason, expression: text, message: `invalid cron expression ${quote(text)}: ${detail}` }))
  if (text === "") return fail("Empty", "it is empty")
  let spec = text
  let timeZone = "UTC"
  let zone: DateTime.TimeZone = UTC
  if (text.startsWith("TZ=") || text.startsWith("CRON_TZ=")) {
    const space = text.indexOf(" ")
    const prefix = text.slice(0, space === -1 ? undefined : space)
    // robfig panics here (a slice out of range); whereabouts would crash.
    if (space === -1) return fail("InvalidTimeZone", `the time zone prefix ${quote(prefix)} must be followed by a space and the schedule`)
    const name = prefix.slice(prefix.indexOf("=") + 1)
    const loaded = loadZone(name)
    if (Either.isLeft(loaded)) return fail("InvalidTimeZone", loaded.left)
    zone = loaded.right
    timeZone = name === "" || name === "Local" ? "UTC" : name
    spec = text.slice(space).replace(GO_TRIM, "")
  }
  if (spec.startsWith(EVERY)) {
    const nanos = parseGoDuration(spec.slice(EVERY.length))
    if (Either.isLeft(nanos)) return fail("InvalidInterval", `@every needs a Go duration such as 1h30m: ${nanos.left}`)
    // robfig: below a second counts as one second; fractions of a second are dropped.
    const seconds = nanos.right < 1_000_000_000n ? 1 : Number(nanos.right / 1_000_000_000n)
    return Either.right({ _tag: "Every", expression: text, interval: Duration.seconds(seconds) })
  }
  if (spec.startsWith("@")) {
    const fields = DESCRIPTORS.get(spec)
    if (fields === undefined) return fail("UnknownDescriptor", `unknown descriptor ${quote(spec)} (${descriptorHint(spec)})`)
    spec = fields
  }
  const fields = spec.split(GO_FIELD_SEPARATOR).filter((f) => f !== "")
  if (fields.length !== 5) {
    const seconds = fields.length === 6 ? " (robfig's standard parser has no seconds field)" : ""
    return fail("FieldCount", `expected 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily, found ${fields.length}${seconds}`)
  }
  const sets = parseFields(fields as [string, string, string, string, string])
  if (Either.isLeft(sets)) return fail("InvalidField", sets.left)
  if (sets.right._tag === "NoMatch") return Either.right({ _tag: "Never", expression: text, timeZone, reason: sets.right.reason })
  const { _tag, ...values } = sets.right
  return Either.right({ _tag: "Cron", expression: text, timeZone, cron: Cron.make({ ...values, tz: zone }) })
}

// JavaScript's Date range; robfig searches at most the five calendar years after the start.
const DATE_LIMIT = 8.64e15
const SEARCH_SPAN = 7 * 366 * 24 * 3_600_000

const instant = (millis: number): Option.Option<Date> =>
  Number.isFinite(millis) && Math.abs(millis) <= DATE_LIMIT ? Option.some(new Date(millis)) : Option.none()

/** The first activation strictly after `after`, as robfig's Next; none where it gives the zero time (nothing within five years). */
export const nextRun = (schedule: Schedule, after: Date): Option.Option<Date> => {
  const from = after.getTime()
  if (!(Math.abs(from) <= DATE_LIMIT - SEARCH_SPAN)) return Option.none()
  // robfig starts from the whole second: an interval is added to it, a crontab searched after it.
  const second = from - (((from % 1000) + 1000) % 1000)
  switch (schedule._tag) {
    case "Never":
      return Option.none()
    case "Every":
      return instant(second + Duration.toMillis(schedule.interval))
    case "Cron":
      return Option.fromNullable(robfigNext(schedule.cron, Option.getOrElse(schedule.cron.tz, () => UTC), from)).pipe(Option.flatMap(instant))
  }
}
