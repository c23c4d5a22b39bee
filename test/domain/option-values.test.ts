import { describe, expect, it } from "@effect/vitest"
import { Duration, Either } from "effect"
import { formatDuration, parseBoolean, parseChoice, parseCount, parseDuration, parsePort, parseRate, parseRatio } from "../../src/domain/option-values.ts"

const ms = (text: string) => Either.map(parseDuration(text), Duration.toMillis)
const why = <A>(parsed: Either.Either<A, string>) => Either.getLeft(parsed).pipe((o) => (o._tag === "Some" ? o.value : "(accepted)"))

describe("durations as Kubernetes users write them", () => {
  it.each([
    ["0", 0],
    ["0s", 0],
    ["-0s", 0],
    ["1.5h", 5_400_000],
    ["300ms", 300],
    ["1h2m3s", 3_723_000],
    ["30s", 30_000],
    ["1m30s", 90_000],
    ["2h", 7_200_000],
    [".5s", 500],
    ["1500us", 1.5],
    // effect's spelling, accepted as before
    ["500 millis", 500],
    ["30 seconds", 30_000],
    ["2 minutes", 120_000],
    ["1 day", 86_400_000]
  ])("%s is %d ms", (text, expected) => {
    expect(ms(text)).toEqual(Either.right(expected))
  })

  it.each([
    ["-1s", "a duration cannot be negative"],
    ["-1 seconds", "a duration cannot be negative"],
    ["1d", "days are not a Go duration unit: write 24h"],
    ["2w", "weeks are not a Go duration unit: write 168h"],
    ["30", 'missing unit in "30" (units are ns, us, ms, s, m, h)'],
    ["1sec", 'unknown unit "sec" in "1sec" (units are ns, us, ms, s, m, h)'],
    ["soon", '"soon" is not a Go duration'],
    ["", '"" is not a Go duration']
  ])("%j is refused: %s", (text, message) => {
    expect(why(parseDuration(text))).toBe(message)
  })

  it("shows durations in Go's syntax, which parses back to the same duration", () => {
    const shown = [Duration.millis(500), Duration.seconds(1), Duration.seconds(30), Duration.seconds(90), Duration.minutes(2), Duration.hours(1.5), Duration.millis(1500), Duration.zero, Duration.micros(250n)]
    expect(shown.map(formatDuration)).toEqual(["500ms", "1s", "30s", "1m30s", "2m", "1h30m", "1.5s", "0s", "250us"])
    for (const d of shown) expect(Either.map(parseDuration(formatDuration(d)), Duration.toNanos)).toEqual(Either.right(Duration.toNanos(d)))
  })
})

describe("counts, ports, rates, ratios, booleans and choices", () => {
  it("a count is a whole number of at least its minimum", () => {
    expect(parseCount(1)("4")).toEqual(Either.right(4))
    expect(why(parseCount(1)("0"))).toBe("must be at least 1")
    expect(why(parseCount(1)("-3"))).toBe("must be at least 1")
    expect(why(parseCount(1)("3.5"))).toBe("not a whole number")
    expect(why(parseCount(1)("12abc"))).toBe("not a whole number")
  })

  it("a port is 0 to 65535", () => {
    expect(parsePort("0")).toEqual(Either.right(0))
    expect(parsePort("65535")).toEqual(Either.right(65_535))
    expect(why(parsePort("99999"))).toBe("not a port (0 to 65535; 0 turns it off)")
    expect(why(parsePort("-1"))).toBe("not a port (0 to 65535; 0 turns it off)")
  })

  it("a rate is at least 0, a ratio above 0 and at most 1", () => {
    expect(parseRate("12.5")).toEqual(Either.right(12.5))
    expect(parseRate("0")).toEqual(Either.right(0))
    expect(why(parseRate("-1"))).toBe("cannot be negative (0: no cap)")
    expect(parseRatio("1")).toEqual(Either.right(1))
    expect(why(parseRatio("0"))).toBe("not a ratio above 0 and at most 1")
    expect(why(parseRatio("1.5"))).toBe("not a ratio above 0 and at most 1")
  })

  it("booleans as effect's Config reads them; choices name the main spellings only", () => {
    expect(["true", "yes", "on", "1", "false", "no", "off", "0"].map((t) => Either.getOrUndefined(parseBoolean(t)))).toEqual([true, true, true, true, false, false, false, false])
    expect(why(parseBoolean("maybe"))).toBe("not a boolean (true or false)")
    const level = parseChoice(["debug", "info", "warning", "error", "warn"], { named: 4, ignoreCase: true })
    expect(level("WARN")).toEqual(Either.right("warn"))
    expect(why(level("loud"))).toBe("must be debug, info, warning or error")
    expect(why(parseChoice(["json", "logfmt"])("JSON"))).toBe("must be json or logfmt")
  })
})
