/**
 * The shutdown deadline. On SIGTERM the controller drains for at most --shutdown-timeout, then
 * releases its lease (a write bounded by --renew-deadline), then closes its servers, informers and
 * connections. Should any of that hang anyway, the kubelet would SIGKILL the process at the end of
 * terminationGracePeriodSeconds with nothing in the log to say where it stood. This deadline ends
 * the process first: one error line that names what was still open (Node's active resources),
 * then exit code 1. The log lines of each stopped part before it show how far the shutdown got.
 * A timer needs the main thread, and native code can keep it (Node's HTTP/2 session once spun
 * there at a shutdown, BENCHMARKS.md's Decisions): a watchdog thread started with the clock
 * SIGKILLs the process BACKSTOP_AFTER later still, after a line of its own on stderr.
 */
import type { EventEmitter } from "node:events"
import { Worker } from "node:worker_threads"
import { Duration, Effect, Runtime } from "effect"
import { ControllerConfig } from "../services/ControllerConfig.ts"

/** What the deadline adds to the drain and the lease release: the rest of the teardown. */
export const TEARDOWN_MARGIN = Duration.seconds(2)

/** How long after the deadline the watchdog thread ends a process whose main thread did not. */
export const BACKSTOP_AFTER = Duration.seconds(1)

/**
 * Starts a thread that, `afterMs` from now, writes one JSON line to stderr and SIGKILLs this
 * process: its own event loop keeps time when the main thread's cannot. It does not keep the
 * process alive; the process ending ends it.
 */
export const startBackstop = (afterMs: number, annotations: Readonly<Record<string, string | number>>, onError: (e: unknown) => void = () => undefined): Worker => {
  const line = `${JSON.stringify({ message: "the main thread did not end the shutdown at its deadline; SIGKILL from the watchdog thread", logLevel: "ERROR", annotations })}\n`
  const worker = new Worker(
    `const { workerData } = require("node:worker_threads");
setTimeout(() => { require("node:fs").writeSync(2, workerData.line); process.kill(workerData.pid, "SIGKILL") }, workerData.afterMs)`,
    // execArgv: none of the process's flags (--input-type=module would make this code ESM).
    { eval: true, execArgv: [], workerData: { pid: process.pid, afterMs, line }, stdout: false, stderr: false }
  )
  // A thread that failed must not take the process down with it: the main thread's timer remains.
  worker.on("error", (e) => onError(e))
  worker.unref()
  return worker
}

export interface DeadlineOptions {
  /** Where the signals come from (process). */
  readonly signals?: EventEmitter
  /** What ends the process (process.exit). */
  readonly exit?: (code: number) => void
  /** What is still open (process.getActiveResourcesInfo). */
  readonly openResources?: () => ReadonlyArray<string>
  /** TEARDOWN_MARGIN unless given. */
  readonly margin?: Duration.DurationInput
  /** What starts the watchdog thread: startBackstop when `exit` is left out (the real process), else nothing. */
  readonly backstop?: (afterMs: number, annotations: Readonly<Record<string, string | number>>, onError: (e: unknown) => void) => void
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
    const backstop = options.backstop ?? (options.exit === undefined ? startBackstop : () => undefined)
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
      const afterMs = Duration.toMillis(Duration.sum(deadline, BACKSTOP_AFTER))
      // Without the thread the timer above still holds, as long as the main thread runs.
      const failed = (e: unknown) => Runtime.runSync(runtime)(Effect.logWarning("the shutdown watchdog thread failed").pipe(Effect.annotateLogs({ error: String(e) })))
      try {
        backstop(afterMs, { signal, deadline: Duration.format(deadline), backstopMs: afterMs }, failed)
      } catch (e) {
        failed(e)
      }
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
