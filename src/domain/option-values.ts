/**
 * Option values as Kubernetes users write them, one set of rules for the configuration and the
 * command line. A parser answers the value, or why it is refused, in a clause read after the
 * option's name and value. Pure.
 */
import { Duration, Either, LogLevel } from "effect"
import { parseSchedule } from "./cron.ts"
import { parseGoDuration } from "./go-duration.ts"

export type Parse<A> = (text: string) => Either.Either<A, string>

/** What an option takes: how --help and docs/options.md show it, a good value, and its parser, whose undefined leaves the option unset. */
export interface ValueType<A = unknown> {
  readonly placeholder: string
  readonly example: string
  readonly parse: Parse<A | undefined>
}

/** effect's own duration text ("500 millis", "30 seconds", "1 day"), accepted too. */
const EFFECT_DURATION = /^\d+(\.\d+)?\s+(nanos?|micros?|millis?|seconds?|minutes?|hours?|days?|weeks?)$/
/** Units people write that Go has not, and what to write instead. */
const NOT_GO_UNITS: ReadonlyArray<readonly [RegExp, string]> = [
  [/[\d.](d|days?)(\d|$)/, "days are not a Go duration unit: write 24h"],
  [/[\d.](w|weeks?)(\d|$)/, "weeks are not a Go duration unit: write 168h"],
  [/[\d.](y|years?)(\d|$)/, "years are not a Go duration unit: write 8760h"]
]

const unsigned = (text: string): Either.Either<Duration.Duration, string> => {
  if (EFFECT_DURATION.test(text)) return Either.fromOption(Duration.decodeUnknown(text), () => "not a duration")
  const notGo = NOT_GO_UNITS.find(([pattern]) => pattern.test(text))
  if (notGo !== undefined) return Either.left(notGo[1])
  return Either.map(parseGoDuration(text), (ns) => Duration.nanos(ns))
}

/** A duration that is not negative: Go's syntax or effect's. */
export const parseDuration: Parse<Duration.Duration> = (text) => {
  const t = text.trim()
  if (!t.startsWith("-")) return unsigned(t)
  // "-0s" is zero in Go; any other sign is refused, not clamped to zero as effect would.
  return Either.flatMap(unsigned(t.slice(1)), (d) => (Duration.toMillis(d) === 0 ? Either.right(d) : Either.left("a duration cannot be negative")))
}

/** A duration above zero: a period, where 0 would spin. */
export const parsePositiveDuration: Parse<Duration.Duration> = (text) =>
  Either.flatMap(parseDuration(text), (d) => (Duration.toMillis(d) > 0 ? Either.right(d) : Either.left("must be above 0")))

/** A duration in Go's syntax, as short as it reads: `500ms`, `1s`, `1m30s`, `2h`, `1.5s`. */
export const formatDuration = (d: Duration.Duration): string => {
  const ns = Duration.unsafeToNanos(d)
  if (ns === 0n) return "0s"
  if (ns < 1_000_000n) return ns % 1_000n === 0n ? `${ns / 1_000n}us` : `${ns}ns`
  if (ns < 1_000_000_000n) return ns % 1_000_000n === 0n ? `${ns / 1_000_000n}ms` : `${Number(ns) / 1e6}ms`
  const hours = ns / 3_600_000_000_000n
  const minutes = (ns / 60_000_000_000n) % 60n
  const seconds = Number(ns % 60_000_000_000n) / 1e9
  return `${hours > 0n ? `${hours}h` : ""}${minutes > 0n ? `${minutes}m` : ""}${seconds > 0 ? `${seconds}s` : ""}`
}

const WHOLE = /^\+?\d+$/
const DECIMAL = /^\+?(\d+(\.\d*)?|\.\d+)$/

/** A whole number of at least `min`. */
export const parseCount =
  (min: number): Parse<number> =>
  (text) => {
    const t = text.trim()
    if (!WHOLE.test(t)) return Either.left(/^-\d+$/.test(t) ? `must be at least ${min}` : "not a whole number")
    const n = Number(t)
    if (!Number.isSafeInteger(n)) return Either.left("too large")
    return n < min ? Either.left(`must be at least ${min}`) : Either.right(n)
  }

/** A TCP port; 0 turns the endpoint off. */
export const parsePort: Parse<number> = (text) => {
  const n = parseCount(0)(text)
  return Either.isRight(n) && n.right <= 65_535 ? n : Either.left("not a port (0 to 65535; 0 turns it off)")
}

/** A number of at least 0 (a rate: 0 means no cap). */
export const parseRate: Parse<number> = (text) => {
  const t = text.trim()
  if (DECIMAL.test(t)) return Either.right(Number(t))
  return Either.left(/^-/.test(t) ? "cannot be negative (0: no cap)" : "not a number")
}

/** A ratio above 0 and at most 1. */
export const parseRatio: Parse<number> = (text) => {
  const t = text.trim()
  const n = DECIMAL.test(t) ? Number(t) : Number.NaN
  return n > 0 && n <= 1 ? Either.right(n) : Either.left("not a ratio above 0 and at most 1")
}

/** effect's booleans, as environment variables may spell them (flags always give true or false). */
const TRUE = ["true", "yes", "on", "1"]
const FALSE = ["false", "no", "off", "0"]
export const parseBoolean: Parse<boolean> = (text) =>
  TRUE.includes(text) ? Either.right(true) : FALSE.includes(text) ? Either.right(false) : Either.left("not a boolean (true or false)")

/** One of a few words (the first ones named when refused; later ones are accepted aliases). */
export const parseChoice =
  <C extends string>(choices: ReadonlyArray<C>, options: { readonly named?: number; readonly ignoreCase?: boolean } = {}): Parse<C> =>
  (text) => {
    const t = options.ignoreCase === true ? text.toLowerCase() : text
    const named = choices.slice(0, options.named ?? choices.length)
    return choices.includes(t as C) ? Either.right(t as C) : Either.left(`must be ${named.slice(0, -1).join(", ")} or ${named.at(-1)}`)
  }

/** What audit, release and preflight print: a table for a person, or JSON. */
export const OUTPUT_FORMATS = ["table", "json"] as const
export type OutputFormat = (typeof OUTPUT_FORMATS)[number]

/** How the logger writes a line (logging.ts). */
export const LOG_FORMATS = ["json", "logfmt", "text"] as const
export type LogFormat = (typeof LOG_FORMATS)[number]

/** The levels LOG_LEVEL takes, in the order messages name them; `warn` is an alias, never named. */
export const LOG_LEVELS: Readonly<Record<string, LogLevel.LogLevel>> = { debug: LogLevel.Debug, info: LogLevel.Info, warning: LogLevel.Warning, error: LogLevel.Error, warn: LogLevel.Warning }

/** "" as unset (an option without a default stays so, one with a default takes it), any other text by `parse`. */
const orUnset = <A>(parse: Parse<A>): Parse<A | undefined> => (text) => (text === "" ? Either.right(undefined) : parse(text))
const parseAny: Parse<string> = Either.right

export const DURATION: ValueType<Duration.Duration> = { placeholder: "<duration>", example: "30s", parse: parseDuration }
export const PERIOD: ValueType<Duration.Duration> = { placeholder: "<duration>", example: "1m", parse: parsePositiveDuration }
export const COUNT: ValueType<number> = { placeholder: "<count>", example: "4", parse: parseCount(1) }
export const PORT: ValueType<number> = { placeholder: "<port>", example: "8080", parse: parsePort }
export const RATE: ValueType<number> = { placeholder: "<qps>", example: "20", parse: parseRate }
export const RATIO: ValueType<number> = { placeholder: "<ratio>", example: "0.9", parse: parseRatio }
export const BOOLEAN: ValueType<boolean> = { placeholder: "", example: "true", parse: parseBoolean }
/** A duration, or "" (blanks too) for none: off. */
export const OPTIONAL_DURATION: ValueType<Duration.Duration> = { ...DURATION, example: "5m", parse: (text) => (text.trim() === "" ? Either.right(undefined) : parseDuration(text)) }
export const NAME: ValueType<string> = { placeholder: "<name>", example: "kube-system", parse: orUnset(parseAny) }
/** A name for which "" is a value: none. */
export const NAME_OR_NONE: ValueType<string> = { ...NAME, parse: parseAny }
export const PATH: ValueType<string> = { placeholder: "<path>", example: "/etc/whereabouts/config", parse: orUnset(parseAny) }
/** A schedule in whereabouts' syntax, checked here and kept as written: run parses it beside its other sources (schedule.ts). */
export const SCHEDULE: ValueType<string> = { placeholder: "<schedule>", example: '"@every 6h"', parse: orUnset((text) => Either.map(Either.mapLeft(parseSchedule(text.trim()), (e) => e.message), () => text)) }
export const LOG_LEVEL: ValueType<string> = { placeholder: "<level>", example: "info", parse: parseChoice(Object.keys(LOG_LEVELS), { named: 4, ignoreCase: true }) }
export const LOG_FORMAT: ValueType<LogFormat> = { placeholder: "<format>", example: "logfmt", parse: orUnset(parseChoice(LOG_FORMATS)) }
export const OUTPUT: ValueType<OutputFormat> = { placeholder: "<format>", example: "json", parse: parseChoice(OUTPUT_FORMATS) }
