import { spawnSync } from "node:child_process"
import { EventEmitter } from "node:events"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, HashMap, Logger } from "effect"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import { armShutdownDeadline, describeResources } from "../../src/programs/shutdown.ts"

/** An armed deadline of 30 + 20 + 10 ms on a fake process: its signals, exit and open handles. */
const setup = Effect.gen(function* () {
  const signals = new EventEmitter()
  const exits: Array<number> = []
  const lines: Array<Record<string, unknown>> = []
  const logger = Logger.make(({ message, logLevel, annotations }) => {
    lines.push({ message: String(message), level: logLevel.label, ...Object.fromEntries(HashMap.toEntries(annotations)) })
  })
  const deadline = yield* armShutdownDeadline({
    signals,
    exit: (code) => void exits.push(code),
    openResources: () => ["TCPSocketWrap", "Timeout", "TCPSocketWrap"],
    margin: "10 millis"
  }).pipe(
    Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
    Effect.provide(ControllerConfig.layerWith({ shutdownTimeout: Duration.millis(30), renewDeadline: Duration.millis(20) }))
  )
  return { signals, exits, lines, deadline }
})

describe("shutdown deadline", () => {
  it.live("a shutdown still running at shutdownTimeout + renewDeadline + margin: one error line naming what is open, exit 1", () =>
    Effect.gen(function* () {
      const { signals, exits, lines, deadline } = yield* setup
      expect(Duration.toMillis(deadline)).toBe(60)
      signals.emit("SIGTERM")
      yield* Effect.sleep("30 millis")
      expect(exits).toEqual([])
      // A second signal does not start a second clock.
      signals.emit("SIGINT")
      yield* Effect.sleep("200 millis")
      expect(exits).toEqual([1])
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatchObject({
        message: "shutdown did not finish before its deadline; exiting",
        level: "ERROR",
        signal: "SIGTERM",
        deadline: "60ms",
        open: "TCPSocketWrap×2, Timeout"
      })
      expect(lines[0]!["elapsedMs"]).toBeGreaterThanOrEqual(55)
    }).pipe(Effect.scoped)
  )

  it.live("no signal, no deadline; the listeners go with the scope", () =>
    Effect.gen(function* () {
      const { signals, exits, lines } = yield* Effect.scoped(
        Effect.tap(setup, ({ signals }) => Effect.sync(() => expect(signals.listenerCount("SIGTERM") + signals.listenerCount("SIGINT")).toBe(2)))
      )
      expect(signals.listenerCount("SIGTERM") + signals.listenerCount("SIGINT")).toBe(0)
      yield* Effect.sleep("150 millis")
      expect(exits).toEqual([])
      expect(lines).toEqual([])
    })
  )

  it("describes open resources by type", () => {
    expect(describeResources([])).toBe("none")
    expect(describeResources(["Timeout", "FSReqCallback", "Timeout"])).toBe("Timeout×2, FSReqCallback")
  })

  it("a main thread that never runs JavaScript again (stuck in native code) is still ended: the watchdog thread's line, then SIGKILL", () => {
    // A real process: SIGTERM to itself, then a loop that never yields, as the HTTP/2 session's
    // spin in Http2Session::SendPendingData held the thread: the deadline's timer cannot fire.
    const root = path.resolve(import.meta.dirname, "../..")
    const code = `
const { Duration, Effect, Layer } = await import("effect")
const { armShutdownDeadline } = await import(${JSON.stringify(path.join(root, "src/programs/shutdown.ts"))})
const ControllerConfig = await import(${JSON.stringify(path.join(root, "src/services/ControllerConfig.ts"))})
process.on("SIGTERM", () => {})
const signalled = Effect.zipRight(Effect.sync(() => process.kill(process.pid, "SIGTERM")), Effect.sleep("50 millis"))
await Effect.runPromise(Effect.scoped(Effect.zipRight(armShutdownDeadline({ margin: "10 millis" }), signalled)).pipe(
  Effect.provide(ControllerConfig.layerWith({ shutdownTimeout: Duration.millis(100), renewDeadline: Duration.millis(100) }))))
const started = Date.now()
while (Date.now() - started < 20_000) {}
process.stdout.write("survived\\n")`
    const started = Date.now()
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], { cwd: root, encoding: "utf8", timeout: 15_000 })
    const elapsed = Date.now() - started
    expect(r.signal).toBe("SIGKILL")
    expect(r.stdout).not.toContain("survived")
    expect(elapsed).toBeLessThan(15_000)
    const line = JSON.parse(r.stderr.trim().split("\n").at(-1)!) as { message: string; logLevel: string; annotations: Record<string, unknown> }
    expect(line).toMatchObject({ logLevel: "ERROR", annotations: { signal: "SIGTERM", deadline: "210ms", backstopMs: 1210 } })
    expect(line.message).toContain("SIGKILL from the watchdog thread")
  }, 20_000)
})

