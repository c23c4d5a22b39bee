/**
 * robfig/cron v3's five-field grammar (minute hour day-of-month month day-of-week): comma lists of
 * `*`, `?`, values, month and day names, ranges and steps, and robfig's day rule, as the field sets
 * of an effect `Cron` (where an empty set allows any value). Fields robfig accepts but no instant
 * can match are told apart from fields it rejects.
 */
import { Either } from "effect"

const INT64_MAX = (1n << 63n) - 1n

/** JSON quoting, plus escapes for invisible characters (a no-break space, a BOM) a log reader cannot see. */
export const quote = (s: string): string =>
  JSON.stringify(s).replace(/[\u007f-\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

interface Field {
  readonly name: string
  readonly min: number
  readonly max: number
  readonly names?: ReadonlyMap<string, number>
  readonly hint?: string
}

const names = (list: ReadonlyArray<string>, first: number): ReadonlyMap<string, number> =>
  new Map(list.map((n, i) => [n, i + first] as const))

const FIELDS: readonly [Field, Field, Field, Field, Field] = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day-of-month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12, names: names(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1), hint: "a month name (jan-dec)" },
  { name: "day-of-week", min: 0, max: 6, names: names(["sun", "mon", "tue", "wed", "thu", "fri", "sat"], 0), hint: "a day name (sun-sat)" }
]

interface ParsedField {
  readonly values: ReadonlySet<number>
  /** robfig's "star bit": a list item starting with `*` or `?` whose step is at most 1. */
  readonly star: boolean
}

/** Go's strconv.Atoi plus robfig's ban on negatives, for a field value or a step. */
const parseInteger = (text: string): bigint | "not-a-number" | "negative" | "too-large" => {
  if (!/^[+-]?[0-9]+$/.test(text)) return "not-a-number"
  const value = BigInt(text.replace(/^\+/, ""))
  if (value > INT64_MAX || value < -INT64_MAX - 1n) return "too-large"
  return value < 0n ? "negative" : value
}

const parseValue = (text: string, field: Field): Either.Either<number, string> => {
  const named = field.names?.get(text.toLowerCase())
  if (named !== undefined) return Either.right(named)
  const value = parseInteger(text)
  if (typeof value === "bigint") return Either.right(value > BigInt(field.max) ? Infinity : Number(value))
  if (value === "too-large") return Either.right(Infinity)
  return Either.left(`${field.name} ${quote(text)} is not a number${field.hint === undefined ? "" : ` or ${field.hint}`}`)
}

/** One list item of a field: `*`, `?`, `n`, `a-b`, each optionally `/step` (`n/step` means `n-max/step`). */
const parseItem = (item: string, field: Field): Either.Either<ParsedField, string> =>
  Either.gen(function* () {
    const [range = "", ...steps] = item.split("/")
    if (steps.length > 1) return yield* Either.left(`${field.name} ${quote(item)} has more than one "/"`)
    const bounds = range.split("-")
    // robfig ignores whatever follows "*-" or "?-".
    const star = bounds[0] === "*" || bounds[0] === "?"
    if (!star && bounds.length > 2) return yield* Either.left(`${field.name} ${quote(item)} has more than one "-"`)
    if (!star && bounds.includes("")) return yield* Either.left(`${field.name} ${quote(item)} is missing a number`)
    const start = star ? field.min : yield* parseValue(bounds[0] ?? "", field)
    let end = star ? field.max : bounds.length === 2 ? yield* parseValue(bounds[1] ?? "", field) : start
    let step = 1
    if (steps[0] !== undefined) {
      const parsed = parseInteger(steps[0])
      if (typeof parsed !== "bigint") {
        const why = parsed === "negative" ? "is negative" : parsed === "too-large" ? "is too large" : "is not a number"
        return yield* Either.left(`${field.name} step ${quote(steps[0])} in ${quote(item)} ${why}`)
      }
      step = parsed > BigInt(field.max) ? Infinity : Number(parsed)
      if (bounds.length === 1) end = field.max
    }
    const show = (v: number, text: string | undefined) => (Number.isFinite(v) ? String(v) : (text ?? ""))
    if (start > field.max) return yield* Either.left(`${field.name} ${show(start, bounds[0])} is above ${field.max}${field.name === "day-of-week" ? " (Sunday is 0)" : ""}`)
    if (end > field.max) return yield* Either.left(`${field.name} ${show(end, bounds[1])} is above ${field.max}${field.name === "day-of-week" ? " (Sunday is 0)" : ""}`)
    if (start < field.min) return yield* Either.left(`${field.name} ${start} is below ${field.min}`)
    if (start > end) return yield* Either.left(`${field.name} range ${quote(item)} runs backwards`)
    if (step === 0) return yield* Either.left(`${field.name} step 0 in ${quote(item)} must be at least 1`)
    const values = new Set<number>()
    for (let v = start; v <= end; v += step) values.add(v)
    return { values, star: star && step <= 1 }
  })

/** A comma list; empty items are dropped, as robfig's strings.FieldsFunc does (`,` alone matches nothing). */
const parseField = (text: string, field: Field): Either.Either<ParsedField, string> =>
  Either.gen(function* () {
    const values = new Set<number>()
    let star = false
    for (const item of text.split(",").filter((i) => i !== "")) {
      const parsed = yield* parseItem(item, field)
      for (const v of parsed.values) values.add(v)
      star ||= parsed.star
    }
    return { values, star }
  })

const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const

const full = (f: ParsedField, field: Field): boolean => f.values.size === field.max - field.min + 1
const restriction = (f: ParsedField, field: Field): ReadonlySet<number> => (full(f, field) ? new Set() : f.values)

// robfig's day rule in effect's terms. robfig ANDs day-of-month and day-of-week when either has its
// star bit (a star field allows every day, so the other alone decides) and ORs them otherwise. effect's
// own parser ANDs them whenever a field starts with "*" (so "*/2" ANDs there and ORs in robfig), and an
// empty set in a Cron allows any day where robfig's empty field matches none. So the sets are built
// here: a field that allows every value becomes the empty set, and what can never match is NoMatch.
const dayRule = (
  dom: ParsedField,
  dow: ParsedField,
  months: ReadonlySet<number>
): Either.Either<{ readonly days: ReadonlySet<number>; readonly weekdays: ReadonlySet<number> }, string> => {
  const [, , domField, , dowField] = FIELDS
  const days = restriction(dom, domField)
  const weekdays = restriction(dow, dowField)
  const monthIndexes = months.size === 0 ? [...DAYS_IN_MONTH.keys()] : [...months].map((m) => m - 1)
  const dayExists = [...dom.values].some((d) => monthIndexes.some((m) => d <= DAYS_IN_MONTH[m]!))
  const noSuchDay = `no month it allows has day ${[...dom.values].join(",")}`
  if (dom.star || dow.star) {
    if (dom.values.size === 0 || dow.values.size === 0) return Either.left(`the ${dom.values.size === 0 ? "day-of-month" : "day-of-week"} field lists no values`)
    if (!dayExists) return Either.left(noSuchDay)
    return Either.right({ days, weekdays })
  }
  if (full(dom, domField) || full(dow, dowField)) return Either.right({ days: new Set(), weekdays: new Set() })
  if (dow.values.size === 0) {
    if (dom.values.size === 0) return Either.left("the day-of-month and day-of-week fields list no values")
    if (!dayExists) return Either.left(noSuchDay)
  }
  return Either.right({ days, weekdays })
}

/** Field sets in effect's `Cron.make` terms; day-of-month and day-of-week OR-ed when both are set. */
export interface FieldSets {
  readonly _tag: "Sets"
  readonly minutes: ReadonlySet<number>
  readonly hours: ReadonlySet<number>
  readonly days: ReadonlySet<number>
  readonly months: ReadonlySet<number>
  readonly weekdays: ReadonlySet<number>
}

/** Fields robfig accepts that no instant matches (it searches five years, then gives up). */
export interface NoMatch {
  readonly _tag: "NoMatch"
  readonly reason: string
}

/** The five fields as robfig reads them, or why it rejects them. */
export const parseFields = (fields: readonly [string, string, string, string, string]): Either.Either<FieldSets | NoMatch, string> =>
  Either.gen(function* () {
    const minute = yield* parseField(fields[0], FIELDS[0])
    const hour = yield* parseField(fields[1], FIELDS[1])
    const dom = yield* parseField(fields[2], FIELDS[2])
    const month = yield* parseField(fields[3], FIELDS[3])
    const dow = yield* parseField(fields[4], FIELDS[4])
    const empty = [minute, hour, month].findIndex((f) => f.values.size === 0)
    if (empty >= 0) return { _tag: "NoMatch", reason: `the ${["minute", "hour", "month"][empty]} field lists no values` } satisfies NoMatch
    const months = restriction(month, FIELDS[3])
    const days = dayRule(dom, dow, months)
    if (Either.isLeft(days)) return { _tag: "NoMatch", reason: days.left } satisfies NoMatch
    return { _tag: "Sets", minutes: restriction(minute, FIELDS[0]), hours: restriction(hour, FIELDS[1]), months, ...days.right } satisfies FieldSets
  })
