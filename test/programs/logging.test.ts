/**
 * The logger as the commands set it up: the format follows the terminal unless one is named, the
 * text line is short (no fiber id, no empty spans, annotations as key=value), and a one-shot
 * command says nothing on stderr at its default level unless something is wrong.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Cause, ConfigError, ConfigProvider, Effect, Either, Logger, LogLevel } from "effect"
import { vi } from "vitest"
import { audit } from "../../src/programs/audit.ts"
import type { LogFormat } from "../../src/domain/option-values.ts"
import { logSettings, logging, textLogger } from "../../src/programs/logging.ts"
import { deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { memory } from "../../src/testing/layers.ts"
import { on } from "../support/objects.ts"
import { createNad } from "../support/world.ts"

const settings = (command: string, terminal: boolean, env: Record<string, string> = {}) =>
  logSettings(command, terminal).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))), Effect.either)

/** What `textLogger` makes of the lines `body` logs. */
const textOf = <A, E>(body: Effect.Effect<A, E>, colours = false) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    yield* body.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.map(textLogger(colours), (line) => void lines.push(line)))))
    return lines
  })

describe("log format", () => {
  it.each<[boolean, LogFormat | "" | undefined, LogFormat]>([
    [true, undefined, "text"],
    [false, undefined, "json"],
    [true, "", "text"],
    [false, "", "json"],
    [true, "json", "json"],
    [true, "logfmt", "logfmt"],
    [false, "text", "text"],
    [false, "logfmt", "logfmt"]
  ])("stderr a terminal: %s, asked for %s → %s", async (terminal, explicit, format) => {
    const chosen = await Effect.runPromise(settings("run", terminal, explicit === undefined ? {} : { LOG_FORMAT: explicit }))
    expect(Either.map(chosen, (s) => s.format)).toEqual(Either.right(format))
  })

  it.effect("from the configuration: LOG_FORMAT wins over the terminal; colours only on a terminal, never with NO_COLOR; a bad value is refused", () =>
    Effect.gen(function* () {
      expect(yield* settings("run", true)).toEqual(Either.right({ format: "text", minimum: LogLevel.Info, colours: true }))
      expect(yield* settings("run", false)).toEqual(Either.right({ format: "json", minimum: LogLevel.Info, colours: false }))
      expect(yield* settings("run", true, { LOG_FORMAT: "json" })).toEqual(Either.right({ format: "json", minimum: LogLevel.Info, colours: true }))
      expect(yield* settings("run", false, { LOG_FORMAT: "text" })).toEqual(Either.right({ format: "text", minimum: LogLevel.Info, colours: false }))
      expect(yield* settings("run", true, { NO_COLOR: "1" })).toEqual(Either.right({ format: "text", minimum: LogLevel.Info, colours: false }))
      const bad = yield* settings("run", true, { LOG_FORMAT: "pretty" })
      expect(Either.isLeft(bad) && ConfigError.isConfigError(bad.left) && bad.left).toMatchObject({ _op: "InvalidData", path: ["LOG_FORMAT"], message: '"pretty": must be json, logfmt or text' })
    }))

  it.effect("the level: warning for the one-shot commands, info for run, and what is asked for wins", () =>
    Effect.gen(function* () {
      const level = (command: string, env: Record<string, string> = {}) => Effect.map(settings(command, false, env), Either.map((s) => s.minimum.label))
      expect([yield* level("run"), yield* level("audit"), yield* level("release"), yield* level("preflight"), yield* level("demo")]).toEqual(
        ["INFO", "WARN", "WARN", "WARN", "WARN"].map(Either.right)
      )
      expect(yield* level("audit", { LOG_LEVEL: "info" })).toEqual(Either.right("INFO"))
      expect(yield* level("run", { LOG_LEVEL: "Debug" })).toEqual(Either.right("DEBUG"))
      const bad = yield* level("run", { LOG_LEVEL: "loud" })
      expect(Either.isLeft(bad) && ConfigError.isConfigError(bad.left) && bad.left).toMatchObject({ _op: "InvalidData", path: ["LOG_LEVEL"], message: '"loud": must be debug, info, warning or error' })
    }))
})

describe("the text line", () => {
  it.live("time, level, message, then the annotations as key=value: no fiber id, no spans, no JSON", () =>
    Effect.gen(function* () {
      const lines = yield* textOf(
        Effect.gen(function* () {
          yield* Effect.logInfo("sweep finished").pipe(Effect.annotateLogs({ pools: 3, freed: 2 }))
          yield* Effect.logWarning("informer for pods failed, restarting").pipe(Effect.annotateLogs({ resource: "pods", error: "list pods: Forbidden (HTTP 403): no", skipped: undefined }))
          yield* Effect.logError("sweep failed")
          yield* Effect.logInfo("became leader").pipe(Effect.annotateLogs({ lease: { name: "l", namespace: "kube-system" } }))
          yield* Effect.logInfo("no schedule").pipe(Effect.annotateLogs({ source: "" }))
        })
      )
      expect(lines).toEqual([
        expect.stringMatching(/^\d\d:\d\d:\d\d INFO {2}sweep finished {2}pools=3 freed=2$/),
        expect.stringMatching(/^\d\d:\d\d:\d\d WARN {2}informer for pods failed, restarting {2}resource=pods error="list pods: Forbidden \(HTTP 403\): no"$/),
        expect.stringMatching(/^\d\d:\d\d:\d\d ERROR sweep failed$/),
        expect.stringMatching(/^\d\d:\d\d:\d\d INFO {2}became leader {2}lease=\{"name":"l","namespace":"kube-system"\}$/),
        expect.stringMatching(/^\d\d:\d\d:\d\d INFO {2}no schedule {2}source=""$/)
      ])
      expect(lines.join("\n")).not.toMatch(/fiber|#\d|spans|\{"message"/)
    }))

  it.live("an open span shows its age; a cause follows on indented lines; colours paint the level only when asked", () =>
    Effect.gen(function* () {
      const [spanned] = yield* textOf(Effect.logInfo("step").pipe(Effect.withLogSpan("sweep")))
      expect(spanned).toMatch(/^\d\d:\d\d:\d\d INFO {2}step {2}sweep=\d+ms$/)
      const [caused] = yield* textOf(Effect.logError("sweep failed", Cause.fail(new Error("boom"))))
      expect(caused!.split("\n")[0]).toMatch(/^\d\d:\d\d:\d\d ERROR sweep failed$/)
      expect(caused!.split("\n").slice(1).every((l) => l.startsWith("    "))).toBe(true)
      expect(caused).toContain("boom")
      const [coloured] = yield* textOf(Effect.logWarning("slow"), true)
      expect(coloured).toContain("\x1b[33mWARN \x1b[0m")
    }))
})

describe("one-shot commands are quiet by default", () => {
  afterEach(() => vi.restoreAllMocks())

  /** audit with an orphan on the in-memory cluster, logging as the command would (not a terminal: JSON): what it wrote on stderr. */
  const auditStderr = (env: Record<string, string>) =>
    Effect.gen(function* () {
      const stderr = vi.spyOn(console, "error").mockImplementation(() => undefined)
      yield* createNad("default", "net1", { range: "10.63.0.0/24" })
      yield* deletePod(yield* startPod("default", "gone", [on("net1")]))
      const layer = yield* logging("audit", false).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
      const report = yield* audit("table").pipe(Effect.provide(layer))
      expect(report.exitCode).toBe(1)
      return stderr.mock.calls.map((args) => args.map(String).join(" "))
    }).pipe(Effect.provide(memory()))

  it.live("audit prints nothing on stderr at the default level; --log-level info shows its sweep line", () =>
    Effect.gen(function* () {
      expect(yield* auditStderr({})).toEqual([])
      const verbose = yield* auditStderr({ LOG_LEVEL: "info" })
      expect(verbose.some((l) => l.includes('"message":"sweep finished (dry run: nothing freed)"'))).toBe(true)
    }))
})
