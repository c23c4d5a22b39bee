import { type Duration, Schedule } from "effect"

/** Exponential from `base`, at most `max` apart (a union takes the shorter delay), jittered unless told not; with `attempts`, done after that many. */
export const backoff = (base: Duration.DurationInput, max: Duration.DurationInput, options: { readonly attempts?: number | undefined; readonly jittered?: false } = {}): Schedule.Schedule<unknown> => {
  const capped = Schedule.exponential(base).pipe(Schedule.union(Schedule.spaced(max)))
  const schedule = options.jittered === false ? capped : Schedule.jittered(capped)
  return options.attempts === undefined ? schedule : Schedule.intersect(schedule, Schedule.recurs(options.attempts - 1))
}
