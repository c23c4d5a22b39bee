import { type Duration, Effect, Schedule } from "effect"

/** Retries `check` every 20 ms until it succeeds, failing after `timeout` (real time: use with it.live). */
export const eventually = <A, E, R>(check: Effect.Effect<A, E, R>, timeout: Duration.DurationInput = "10 seconds") =>
  check.pipe(Effect.retry(Schedule.spaced("20 millis")), Effect.timeout(timeout))

/** Fails unless `cond()` holds, with `what` as the error, for use inside `eventually`. */
export const require = (cond: () => boolean, what: string) => Effect.suspend(() => (cond() ? Effect.void : Effect.fail(what)))
