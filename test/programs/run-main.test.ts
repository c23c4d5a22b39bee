import { EventEmitter } from "node:events"
import { describe, expect, it } from "vitest"
import { Cause, Duration, Effect, HashMap, Logger, Option } from "effect"
import { type ProcessPort, describeResources, runMain } from "../../src/programs/run-main.ts"

/** A fake process: its signals, its exit codes, what it wrote on stderr and what it logged. */
const fakeProcess = () => {
  const signals = new EventEmitter()
  const exits: Array<number> = []
  const stderr: Array<string> = []
  const logs: Array<Record<string, unknown>> = []
  const logger = Logger.make(({ message, logLevel, annotations }) => {
    logs.push({ message: String(message), level: logLevel.label, ...Object.fromEntries(HashMap.toEntries(annotations)) })
  })
  const port: ProcessPort = { signals, exit: (code) => void exits.push(code), stderr: (line) => void stderr.push(line), openResources: () => ["TCPSocketWrap", "Timeout", "TCPSocketWrap"] }
  const log = (line: Effect.Effect<void>) => Effect.runSync(Effect.provide(line, Logger.replace(Logger.defaultLogger, logger)))
  return { signals, exits, stderr, logs, port, log }
}

const failing = { onFailure: (cause: Cause.Cause<Error>) => ({ code: 3, lines: [`test: ${Cause.failureOption(cause).pipe(Option.map((e) => e.message), Option.getOrElse(() => Cause.pretty(cause)))}`] }) }
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("runMain", () => {
  it("the program's value is the exit code; a failure's code and lines are onFailure's; the signal listeners go with the program", async () => {
    const ok = fakeProcess()
    runMain(Effect.succeed(4), { name: "test", log: ok.log, process: ok.port, ...failing })
    await sleep(20)
    expect(ok.exits).toEqual([4])
    expect(ok.signals.listenerCount("SIGTERM") + ok.signals.listenerCount("SIGINT")).toBe(0)
    const bad = fakeProcess()
    runMain(Effect.fail(new Error("could not reach the API server")), { name: "test", log: bad.log, process: bad.port, ...failing })
    await sleep(20)
    expect([bad.exits, bad.stderr]).toEqual([[3], ["test: could not reach the API server"]])
  })

  it("the first signal interrupts the program (its finalizers run), which exits 0; a second exits 130 at once", async () => {
    const p = fakeProcess()
    const finalized: Array<string> = []
    const program = Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => void finalized.push("drained"))), Effect.as(0))
    runMain(program, { name: "test", log: p.log, process: p.port, ...failing })
    await sleep(10)
    p.signals.emit("SIGTERM")
    await sleep(20)
    expect([finalized, p.stderr, p.exits]).toEqual([["drained"], ["test: SIGTERM received, shutting down"], [0]])
    // A shutdown that hangs: the second signal does not wait for it.
    const stuck = fakeProcess()
    runMain(Effect.never.pipe(Effect.onInterrupt(() => Effect.never), Effect.as(0)), { name: "test", log: stuck.log, process: stuck.port, ...failing })
    await sleep(10)
    stuck.signals.emit("SIGINT")
    await sleep(10)
    expect(stuck.exits).toEqual([])
    stuck.signals.emit("SIGTERM")
    expect(stuck.exits).toEqual([130])
  })

  it("a shutdown still running at the deadline: one error line naming what is open, exit 1; no signal, no deadline", async () => {
    const p = fakeProcess()
    const hanging = Effect.never.pipe(Effect.onInterrupt(() => Effect.never), Effect.as(0))
    runMain(hanging, { name: "test", deadline: Duration.millis(60), log: p.log, process: p.port, ...failing })
    await sleep(100)
    // No signal yet: the deadline is not running.
    expect([p.exits, p.logs]).toEqual([[], []])
    p.signals.emit("SIGTERM")
    await sleep(250)
    expect(p.exits).toEqual([1])
    expect(p.logs).toHaveLength(1)
    expect(p.logs[0]).toMatchObject({ message: "shutdown did not finish before its deadline; exiting", level: "ERROR", signal: "SIGTERM", deadline: "60ms", open: "TCPSocketWrap×2, Timeout" })
    expect(typeof p.logs[0]!["elapsedMs"]).toBe("number")
  })

  it("describes open resources by type", () => {
    expect(describeResources([])).toBe("none")
    expect(describeResources(["Timeout", "FSReqCallback", "Timeout"])).toBe("Timeout×2, FSReqCallback")
  })
})
