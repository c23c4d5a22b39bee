/**
 * Go's `time.ParseDuration`, the syntax of robfig/cron's `@every <duration>`: a signed sequence of
 * decimal numbers, each with an optional fraction and a unit (`1h30m`, `1.5s`, `-2m`, `.5h`).
 * Exact to the nanosecond, with Go's int64 range and its rounding of fractions.
 */
import { Either } from "effect"

const MAX = 1n << 63n
const UNITS: ReadonlyMap<string, bigint> = new Map([
  ["ns", 1n],
  ["us", 1_000n],
  ["µs", 1_000n], // U+00B5 micro sign
  ["μs", 1_000n], // U+03BC Greek mu
  ["ms", 1_000_000n],
  ["s", 1_000_000_000n],
  ["m", 60_000_000_000n],
  ["h", 3_600_000_000_000n]
])

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9"
const digitsAt = (s: string, from: number): number => {
  let i = from
  while (isDigit(s[i])) i++
  return i
}

/** Nanoseconds of a Go duration string, or why Go would reject it (one clause, no trailing period). */
export const parseGoDuration = (text: string): Either.Either<bigint, string> => {
  const invalid = Either.left(`${JSON.stringify(text)} is not a Go duration`)
  const outOfRange = Either.left(`${JSON.stringify(text)} is out of range (at most 2562047h47m16.854775807s)`)
  const negative = text[0] === "-"
  const s = text[0] === "-" || text[0] === "+" ? text.slice(1) : text
  if (s === "0") return Either.right(0n)
  if (s === "") return invalid
  let total = 0n
  let i = 0
  while (i < s.length) {
    if (!(s[i] === "." || isDigit(s[i]))) return invalid
    const intEnd = digitsAt(s, i)
    let whole = 0n
    for (let k = i; k < intEnd; k++) {
      // Go stops at 2^63 while accumulating; any longer number is out of range.
      whole = whole * 10n + BigInt(s.charCodeAt(k) - 48)
      if (whole > MAX) return outOfRange
    }
    let fraction = 0n
    let scale = 1
    let fracEnd = intEnd
    if (s[intEnd] === ".") {
      fracEnd = digitsAt(s, intEnd + 1)
      let overflow = false
      for (let k = intEnd + 1; k < fracEnd && !overflow; k++) {
        // Go keeps the digits that fit in an int64 and ignores the rest.
        const next = fraction * 10n + BigInt(s.charCodeAt(k) - 48)
        if (fraction > (MAX - 1n) / 10n || next > MAX) overflow = true
        else {
          fraction = next
          scale *= 10
        }
      }
    }
    if (intEnd === i && fracEnd <= intEnd + 1) return invalid
    let unitEnd = fracEnd
    while (unitEnd < s.length && s[unitEnd] !== "." && !isDigit(s[unitEnd])) unitEnd++
    if (unitEnd === fracEnd) return Either.left(`missing unit in ${JSON.stringify(text)} (units are ns, us, ms, s, m, h)`)
    const unitText = s.slice(fracEnd, unitEnd)
    const unit = UNITS.get(unitText)
    if (unit === undefined) {
      return Either.left(`unknown unit ${JSON.stringify(unitText)} in ${JSON.stringify(text)} (units are ns, us, ms, s, m, h)`)
    }
    if (whole > MAX / unit) return outOfRange
    let value = whole * unit
    // Go converts the fraction through float64 and truncates, so 1.0000000001h is not exact either.
    if (fraction > 0n) value += BigInt(Math.trunc(Number(fraction) * (Number(unit) / scale)))
    total += value
    if (value > MAX || total > MAX) return outOfRange
    i = unitEnd
  }
  if (negative) return Either.right(-total)
  return total > MAX - 1n ? outOfRange : Either.right(total)
}
