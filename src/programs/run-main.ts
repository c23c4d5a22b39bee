/**
 * The process's edge (as @effect/platform-node's runMain): the one owner of the signals, the shutdown
 * deadline and the exit code. The first SIGTERM or SIGINT interrupts the program and starts the
 * deadline; a second exits 130. A shutdown still running at the deadline logs what was still open and
 * exits 1, where the kubelet's SIGKILL would leave no trace. Exit code: the program's value, 0 when
 * a signal interrupted it, else what `onFailure` makes of its cause.
 */
import type { EventEmitter } from "node:events"
import { Cause, Duration, Effect, Exit, Fiber } from "effect"

/** The process as runMain sees it; a test passes its own. */
export interface ProcessPort {
  readonly signals: EventEmitter
  readonly exit: (code: number) => void
  readonly stderr: (line: string) => void
  /** What is still open (process.getActiveResourcesInfo). */
  readonly openResources: () => ReadonlyArray<string>
}

const nodeProcess: ProcessPort = {
  signals: process,
  exit: (code) => process.exit(code),
  stderr: (line) => void process.stderr.write(`${line}\n`),
  openResources: () => process.getActiveResourcesInfo()
}

interface MainOptions<E> {
  /** The command's name, in front of the lines runMain writes itself. */
  readonly name: string
  /** How long the program may take to end after the first signal; undefined: as long as it takes. */
  readonly deadline?: Duration.Duration | undefined
  /** The exit code of a program that failed (or died), and the lines that say why, for stderr. */
  readonly onFailure: (cause: Cause.Cause<E>) => { readonly code: number; readonly lines: ReadonlyArray<string> }
  /** Writes one log line (the deadline's) with the program's logger. */
  readonly log: (line: Effect.Effect<void>) => void
  readonly process?: ProcessPort
}

/** Resource types and how many of each: "TCPSocketWrap×3, Timeout×2". */
export const describeResources = (resources: ReadonlyArray<string>): string =>
  [...Map.groupBy(resources, (r) => r)].map(([r, all]) => (all.length === 1 ? r : `${r}×${all.length}`)).join(", ") || "none"

/** Runs `program` as the process: its signals, its deadline, its exit code (see the module's comment). */
export const runMain = <E>(program: Effect.Effect<number, E>, options: MainOptions<E>): void => {
  const os = options.process ?? nodeProcess
  const fiber = Effect.runFork(program)
  let signalled: { readonly signal: string; readonly at: number } | undefined
  const expire = (deadline: Duration.Duration) => {
    if (signalled === undefined) return
    options.log(
      Effect.logError("shutdown did not finish before its deadline; exiting").pipe(
        Effect.annotateLogs({ signal: signalled.signal, deadline: Duration.format(deadline), elapsedMs: Date.now() - signalled.at, open: describeResources(os.openResources()) })
      )
    )
    os.exit(1)
  }
  const onSignal = (signal: string) => {
    if (signalled !== undefined) return os.exit(130)
    signalled = { signal, at: Date.now() }
    os.stderr(`${options.name}: ${signal} received, shutting down`)
    // The timer keeps no process alive, and outlives the program: what closes after it is covered too.
    if (options.deadline !== undefined) setTimeout(expire, Duration.toMillis(options.deadline), options.deadline).unref()
    Effect.runFork(Fiber.interrupt(fiber))
  }
  const handlers = (["SIGTERM", "SIGINT"] as const).map((signal) => [signal, () => onSignal(signal)] as const)
  for (const [signal, handler] of handlers) os.signals.on(signal, handler)
  fiber.addObserver((exit) => {
    for (const [signal, handler] of handlers) os.signals.off(signal, handler)
    if (Exit.isSuccess(exit)) return os.exit(exit.value)
    if (Cause.isInterruptedOnly(exit.cause)) return os.exit(0)
    const { code, lines } = options.onFailure(exit.cause)
    for (const line of lines) os.stderr(line)
    os.exit(code)
  })
}
