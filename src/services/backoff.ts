import { type Duration, Schedule } from "effect"

/**
 * Exponential backoff from `base`, at most `max` apart (the union of two schedules takes the shorter
 * delay), jittered unless `jittered: false`; with `attempts`, done after that many attempts.
 */
export const backoff = (
  base: Duration.DurationInput,
  max: Duration.DurationInput,
  options: { readonly attempts?: number | undefined; readonly jittered?: boolean } = {}
): Schedule.Schedule<unknown> => {
  const capped = Schedule.exponential(base).pipe(Schedule.union(Schedule.spaced(max)))
  const schedule = options.jittered === false ? capped : Schedule.jittered(capped)
  return options.attempts === undefined ? schedule : Schedule.intersect(schedule, Schedule.recurs(options.attempts - 1))
}
