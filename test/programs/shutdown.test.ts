import { EventEmitter } from "node:events"
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
})
