/** Effect-side helpers around a controller child process: start, wait for it to lead, read its metrics and logs. */
import { type Duration, Effect } from "effect"
import { type ControllerOptions, type ControllerProcess, type LogLine, startController } from "./controller-process.ts"
import { waitUntil } from "./world.ts"

/**
 * Short timings for tests: a drain of 5 s, so a stuck shutdown ends at 5 + 12 s (leader election
 * keeps client-go's timings, as shipped: a stopped controller releases its Lease, and the next one
 * takes it at its first attempt). The cron sweep is pinned to leap days at midnight so it never
 * runs by surprise: a test knows whether a sweep (start-up only) or a deletion freed an address.
 */
export const TEST_TIMINGS: ReadonlyArray<string> = ["--shutdown-timeout", "5 seconds"]

/** A schedule that never fires during a test: only the start-up sweep runs. */
export const NEVER_AGAIN = "0 0 29 2 *"

/**
 * Starts a child (TEST_TIMINGS first, so `args` can override them), the sweep scheduled with the
 * flag to NEVER_AGAIN unless `schedule` says the scenario gives it its own sources.
 */
export const launch = (options: ControllerOptions, schedule: "never again" | "own sources" = "never again") =>
  Effect.promise(() =>
    startController({ ...options, args: [...TEST_TIMINGS, ...(schedule === "never again" ? ["--reconcile-schedule", NEVER_AGAIN] : []), ...(options.args ?? [])] })
  )

const has = (ctl: ControllerProcess, message: string) => ctl.logs().some((l) => l.message === message)

const exitedWhy = (ctl: ControllerProcess) => () => (ctl.running() ? undefined : `the controller exited:\n${ctl.tail()}`)

/**
 * Waits until the controller serves /readyz 200 and, as leader, runs its deletion loop and has
 * finished its start-up sweep (when `sweep`): from then on a deletion goes through the deletion
 * path, and whatever was deleted before was seen by the sweep.
 */
export const awaitLeading = (ctl: ControllerProcess, options: { readonly sweep?: boolean; readonly timeout?: Duration.DurationInput } = {}) =>
  waitUntil(
    `controller ${ctl.identity} is ready and leading`,
    Effect.promise(async () => ({
      readyz: await ctl.probe("/readyz"),
      loop: has(ctl, "deletion loop started"),
      swept: options.sweep === false || has(ctl, "sweep finished")
    })),
    (s) => s.readyz === 200 && s.loop && s.swept,
    { context: () => ctl.tail(), abort: exitedWhy(ctl), timeout: options.timeout ?? "30 seconds" }
  )

/**
 * The one controller a suite's scenarios share: `get` starts it (and waits until it leads, its
 * start-up sweep done) when none runs; a scenario that needs a restart stops `current()`, and the
 * next `get` starts another (options are read again: a fresh identity).
 */
export const sharedController = (options: () => ControllerOptions) => {
  let ctl: ControllerProcess | undefined
  const get = Effect.gen(function* () {
    if (ctl !== undefined && ctl.running()) return ctl
    const started = yield* launch(options())
    ctl = started
    yield* awaitLeading(started)
    return started
  })
  return { get, current: () => ctl }
}

/** Waits until a metric sample satisfies `ok` (absent samples read as undefined). */
export const awaitMetric = (ctl: ControllerProcess, name: string, labels: Readonly<Record<string, string>>, ok: (v: number | undefined) => boolean, timeout: Duration.DurationInput = "20 seconds") =>
  waitUntil(`${name}${JSON.stringify(labels)} on ${ctl.identity}`, Effect.promise(() => ctl.metric(name, labels)), ok, {
    context: () => ctl.tail(),
    abort: exitedWhy(ctl),
    timeout
  })

export const metricOf = (ctl: ControllerProcess, name: string, labels: Readonly<Record<string, string>> = {}) => Effect.promise(() => ctl.metric(name, labels))

/** Log lines with this message (and annotations matching `where`). */
export const logsWith = (ctl: ControllerProcess, message: string, where: Readonly<Record<string, unknown>> = {}): ReadonlyArray<LogLine> =>
  ctl.logs().filter((l) => l.message === message && Object.entries(where).every(([k, v]) => l.annotations[k] === v))

/** Lines that report an HTTP 403 (the controller lacking a permission). */
export const forbiddenLines = (ctl: ControllerProcess): ReadonlyArray<LogLine> => ctl.logs().filter((l) => /Forbidden|HTTP 403/.test(l.raw))
