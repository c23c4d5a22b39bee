/**
 * robfig/cron v3's search for the next activation: it walks the wall clock field by field (month, day,
 * hour, minute, second) with Go's time arithmetic, so, unlike effect's `Cron.next`, a wall time a
 * spring-forward change skips does not run that day, one a fall-back change repeats runs twice, and
 * nothing is found beyond the fifth calendar year after the start; and, unlike effect's, it never
 * answers an instant before the start (effect's does from inside a repeated hour, so a sweep loop on
 * it would run at once, up to once per matching minute of that hour). Go's rules reproduced here:
 * - `time.Date` of a wall time in a gap or an overlap takes the offset found at the wall time read
 *   as UTC, then re-checks it once (so Berlin's 02:30 gap is 03:30 CEST, New York's is 01:30 EST);
 * - `AddDate` re-normalises wall fields (Jan 31 + 1 month = Mar 3); `Add` and `Truncate` are absolute;
 * - robfig's day loop moves a day start that is not midnight (a zone skipping 00:00) back to or on
 *   to the nearest midnight.
 */
import { type Cron, DateTime } from "effect"

const SECOND = 1_000
const MINUTE = 60_000
const HOUR = 3_600_000

const floorMod = (a: number, b: number): number => ((a % b) + b) % b

type Wall = Readonly<Record<"year" | "month" | "day" | "hour" | "minute" | "second" | "weekday", number>>

const wallAt = (zone: DateTime.TimeZone, millis: number): Wall => {
  const p = DateTime.toParts(DateTime.unsafeMakeZoned(millis, { timeZone: zone }))
  return { year: p.year, month: p.month, day: p.day, hour: p.hours, minute: p.minutes, second: p.seconds, weekday: p.weekDay }
}

const offsetAt = (zone: DateTime.TimeZone, millis: number): number =>
  DateTime.zonedOffset(DateTime.unsafeMakeZoned(millis, { timeZone: zone }))

/** Go's `time.Date(year, month, day, hour, minute, second, 0, zone)`, fields normalised. */
const goDate = (zone: DateTime.TimeZone, year: number, month: number, day: number, hour: number, minute: number, second: number): number => {
  const d = new Date(0)
  d.setUTCFullYear(year, month - 1, day)
  d.setUTCHours(hour, minute, second, 0)
  const local = d.getTime()
  return local - offsetAt(zone, local - offsetAt(zone, local))
}

const allows = (set: ReadonlySet<number>, value: number): boolean => set.size === 0 || set.has(value)

// The schedule's sets follow effect's conventions: both day sets non-empty means either may match.
const dayAllowed = (cron: Cron.Cron, w: Wall): boolean =>
  cron.days.size === 0
    ? allows(cron.weekdays, w.weekday)
    : cron.weekdays.size === 0
    ? cron.days.has(w.day)
    : cron.days.has(w.day) || cron.weekdays.has(w.weekday)

/** robfig's `SpecSchedule.Next` in `zone`: the first activation after `after` (ms), or undefined. */
export const robfigNext = (cron: Cron.Cron, zone: DateTime.TimeZone, after: number): number | undefined => {
  let t = after - floorMod(after, SECOND) + SECOND
  let w = wallAt(zone, t)
  const yearLimit = w.year + 5
  // The first field that moves resets the smaller ones; later moves keep them (robfig's `added`).
  let added = false
  const move = (reset: () => number, step: (t: number) => number): void => {
    if (!added) {
      added = true
      t = reset()
    }
    t = step(t)
    w = wallAt(zone, t)
  }
  wrap: for (;;) {
    if (w.year > yearLimit) return undefined
    while (!allows(cron.months, w.month)) {
      move(() => goDate(zone, w.year, w.month, 1, 0, 0, 0), (t) => {
        const v = wallAt(zone, t)
        return goDate(zone, v.year, v.month + 1, v.day, v.hour, v.minute, v.second)
      })
      if (w.month === 1) continue wrap
    }
    while (!dayAllowed(cron, w)) {
      move(() => goDate(zone, w.year, w.month, w.day, 0, 0, 0), (t) => {
        const v = wallAt(zone, t)
        const next = goDate(zone, v.year, v.month, v.day + 1, v.hour, v.minute, v.second)
        const hour = wallAt(zone, next).hour
        return hour === 0 ? next : next + (hour > 12 ? 24 - hour : -hour) * HOUR
      })
      if (w.day === 1) continue wrap
    }
    while (!allows(cron.hours, w.hour)) {
      move(() => goDate(zone, w.year, w.month, w.day, w.hour, 0, 0), (t) => t + HOUR)
      if (w.hour === 0) continue wrap
    }
    while (!allows(cron.minutes, w.minute)) {
      move(() => t - floorMod(t, MINUTE), (t) => t + MINUTE)
      if (w.minute === 0) continue wrap
    }
    while (!allows(cron.seconds, w.second)) {
      move(() => t - floorMod(t, SECOND), (t) => t + SECOND)
      if (w.second === 0) continue wrap
    }
    return t
  }
}
