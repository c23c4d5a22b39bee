/**
 * The logger of every command, on stderr, in the format and from the level asked for. Unset, both
 * follow the reader: text on a terminal, else JSON; warnings for a command answering on stdout, info for `run`.
 */
import { Cause, Config, type ConfigError, Effect, Inspectable, Layer, Logger, type LogLevel, Option } from "effect"
import { LOG_LEVELS, type LogFormat } from "../domain/option-values.ts"
import * as ControllerConfig from "../services/ControllerConfig.ts"

const two = (n: number) => String(n).padStart(2, "0")

/** A value as a person reads it: a string bare when it is one word, else quoted; anything else as compact JSON. */
const shown = (value: unknown): string => {
  if (typeof value !== "string") return Inspectable.toStringUnknown(value, 0)
  return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)
}

const COLOURS: Readonly<Partial<Record<LogLevel.LogLevel["_tag"], string>>> = { Trace: "90", Debug: "34", Info: "32", Warning: "33", Error: "31", Fatal: "1;31" }

/**
 * One line a person reads: `12:00:01 INFO  sweep finished  pools=3 freed=2` (local time, level, message,
 * annotations and open spans as key=value; no fiber id); a cause follows on indented lines.
 */
export const textLogger = (colours: boolean): Logger.Logger<unknown, string> =>
  Logger.make(({ annotations, cause, date, logLevel, message, spans }) => {
    const paint = (code: string | undefined, text: string) => (colours && code !== undefined ? `\x1b[${code}m${text}\x1b[0m` : text)
    const words = (Array.isArray(message) ? message : [message]).map((m) => (typeof m === "string" ? m : Inspectable.toStringUnknown(m, 0)))
    const pairs: Array<string> = []
    for (const [key, value] of annotations) if (value !== undefined) pairs.push(`${paint("90", `${key}=`)}${shown(value)}`)
    for (const span of spans) pairs.push(`${paint("90", `${span.label}=`)}${date.getTime() - span.startTime}ms`)
    const time = paint("90", `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}`)
    const line = `${time} ${paint(COLOURS[logLevel._tag], logLevel.label.padEnd(5))} ${words.join(" ")}${pairs.length === 0 ? "" : `  ${pairs.join(" ")}`}`
    return Cause.isEmpty(cause) ? line : `${line}\n${Cause.pretty(cause, { renderErrorCause: true }).replace(/^/gm, "    ")}`
  })

/** The settings of `command`, from its log options (their variables), NO_COLOR (https://no-color.org) and whether stderr is a terminal. */
export const logSettings = (command: string, terminal: boolean) =>
  Effect.gen(function* () {
    const { logLevel, logFormat } = ControllerConfig.OPTIONS
    const level = yield* ControllerConfig.read({ ...logLevel, default: command === "run" ? logLevel.default : "warning" })
    const explicit = yield* ControllerConfig.read(logFormat)
    const noColour = yield* Config.option(Config.string("NO_COLOR"))
    const format: LogFormat = explicit ?? (terminal ? "text" : "json")
    return { format, minimum: LOG_LEVELS[level]!, colours: terminal && Option.getOrElse(noColour, () => "") === "" }
  })

/** The logger as a layer, on stderr: stdout carries only what a command prints (`audit -o json > report.json`). */
export const logging = (command: string, terminal: boolean): Effect.Effect<Layer.Layer<never>, ConfigError.ConfigError> =>
  Effect.map(logSettings(command, terminal), ({ format, minimum, colours }) => {
    const logger = format === "json" ? Logger.jsonLogger : format === "logfmt" ? Logger.logfmtLogger : textLogger(colours)
    return Layer.merge(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(logger)), Logger.minimumLogLevel(minimum))
  })
