/**
 * The shutdown deadline. On SIGTERM the controller drains for at most --shutdown-timeout, then
 * releases its lease (a write bounded by --renew-deadline), then closes its servers, informers and
 * connections. Should any of that hang anyway, the kubelet would SIGKILL the process at the end of
 * terminationGracePeriodSeconds with nothing in the log to say where it stood. This deadline ends
 * the process first: one error line that names what was still open (Node's active resources),
 * then exit code 1. The log lines of each stopped part before it show how far the shutdown got.
 */
import type { EventEmitter } from "node:events"
import { Duration, Effect, Runtime } from "effect"
import { ControllerConfig } from "../services/ControllerConfig.ts"

/** What the deadline adds to the drain and the lease release: the rest of the teardown. */
export const TEARDOWN_MARGIN = Duration.seconds(2)

export interface DeadlineOptions {
  /** Where the signals come from (process). */
  readonly signals?: EventEmitter
  /** What ends the process (process.exit). */
  readonly exit?: (code: number) => void
  /** What is still open (process.getActiveResourcesInfo). */
  readonly openResources?: () => ReadonlyArray<string>
  /** TEARDOWN_MARGIN unless given. */
  readonly margin?: Duration.DurationInput
}

/** Resource types and how many of each: "TCPSocketWrap×3, Timeout×2". */
export const describeResources = (resources: ReadonlyArray<string>): string => {
  const counts = new Map<string, number>()
  for (const r of resources) counts.set(r, (counts.get(r) ?? 0) + 1)
  return [...counts].map(([r, n]) => (n === 1 ? r : `${r}×${n}`)).join(", ") || "none"
}

/**
 * Listens for the surrounding scope: from the first SIGTERM or SIGINT, the shutdown gets
 * shutdownTimeout + renewDeadline + TEARDOWN_MARGIN (42 s by default, inside the deployment's
 * terminationGracePeriodSeconds of 45). The timer does not keep the process alive, and it outlives
 * the scope: what closes after it (the layers) is covered too.
 */
export const armShutdownDeadline = (options: DeadlineOptions = {}) =>
  Effect.gen(function* () {
    const config = yield* ControllerConfig
    const signals = options.signals ?? process
    const exit = options.exit ?? ((code: number) => process.exit(code))
    const openResources = options.openResources ?? (() => process.getActiveResourcesInfo())
    const deadline = Duration.sum(Duration.sum(config.shutdownTimeout, config.renewDeadline), options.margin ?? TEARDOWN_MARGIN)
    const runtime = yield* Effect.runtime<never>()
    let timer: ReturnType<typeof setTimeout> | undefined
    const onSignal = (signal: string) => {
      if (timer !== undefined) return
      const started = Date.now()
      timer = setTimeout(() => {
        Runtime.runSync(runtime)(
          Effect.logError("shutdown did not finish before its deadline; exiting").pipe(
            Effect.annotateLogs({
              signal,
              deadline: Duration.format(deadline),
              elapsedMs: Date.now() - started,
              open: describeResources(openResources())
            })
          )
        )
        exit(1)
      }, Duration.toMillis(deadline))
      timer.unref?.()
    }
    const onTerm = () => onSignal("SIGTERM")
    const onInt = () => onSignal("SIGINT")
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        signals.on("SIGTERM", onTerm)
        signals.on("SIGINT", onInt)
      }),
      // A running timer stays: the layers (informers, connections) close after this scope.
      () =>
        Effect.sync(() => {
          signals.off("SIGTERM", onTerm)
          signals.off("SIGINT", onInt)
        })
    )
    return deadline
  })
