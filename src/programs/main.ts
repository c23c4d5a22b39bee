#!/usr/bin/env node
/**
 * The entry point, composition only: command line → configuration → logger → layers → program.
 * SIGTERM/SIGINT interrupt the program, which stops taking work, drains and releases its lease.
 */
import { readFileSync } from "node:fs"
import { Cause, Config, ConfigError, Effect, Either, Exit, Fiber, Layer } from "effect"
import * as ControllerConfig from "../services/ControllerConfig.ts"
import { layerLive } from "../services/KubeApiLive.ts"
import { EventRecorder } from "../services/EventRecorder.ts"
import * as Metrics from "../services/Metrics.ts"
import * as NadConfigs from "../services/NadConfigs.ts"
import { audit } from "./audit.ts"
import {
  EXIT_USAGE,
  type ParsedCli,
  checkOptions,
  configProvider,
  deprecationWarnings,
  describeConfigError,
  exitCodeOfFailure,
  helpText,
  parseCli,
  withDeprecatedVariables
} from "./cli.ts"
import { programKubeApi, stores, withKubeApi } from "./layers.ts"
import { logging } from "./logging.ts"
import { preflight } from "./preflight.ts"
import { loadTargets, release } from "./release.ts"
import { runController } from "./run.ts"
import { armShutdownDeadline } from "./shutdown.ts"

/** From package.json: two levels up from src/programs/*.ts, one up from the bundle (dist/main.js). */
const version = (): string => {
  for (const relative of ["../../package.json", "../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), "utf8")) as { name?: string; version?: string }
      if (pkg.name === "whereabouts-controller" && typeof pkg.version === "string") return pkg.version
    } catch {
      // not there: try the next place
    }
  }
  return "unknown"
}

/**
 * The demo and the in-memory cluster it runs on live in src/testing, which the image's bundle
 * leaves out (scripts/build.ts): they are loaded only for `demo`, from a source checkout.
 */
const DEMO_MODULE = "../testing/demo.ts"
const loadDemo = Effect.tryPromise({
  try: () => import(DEMO_MODULE) as Promise<typeof import("../testing/demo.ts")>,
  catch: () => new Error("the demo is not part of this build: run `npm run demo` from a source checkout")
})

const configLayers = Layer.provideMerge(NadConfigs.layer, ControllerConfig.layer)

/** The one-shot commands (audit, release): the stores over the live API, metrics of their own, no informers and no Lease. */
const oneShot = stores.pipe(Layer.provideMerge(programKubeApi(layerLive)), Layer.provideMerge(Metrics.layer), Layer.provideMerge(configLayers))

const outputFormat = Config.literal("table", "json")("OUTPUT").pipe(Config.withDefault(ControllerConfig.DEFAULTS.output))

const program = (cli: ParsedCli): Effect.Effect<number, unknown> =>
  Effect.gen(function* () {
    switch (cli.command) {
      case "run": {
        yield* Effect.scoped(Effect.zipRight(armShutdownDeadline(), runController)).pipe(
          Effect.provide(withKubeApi(layerLive, Metrics.layerWithProcess).pipe(Layer.provideMerge(configLayers)))
        )
        return 0
      }
      case "audit": {
        const result = yield* audit(yield* outputFormat).pipe(Effect.provide(oneShot))
        process.stdout.write(`${result.text}\n`)
        return result.exitCode
      }
      case "release": {
        // A one-shot next to the controller: no Lease, every write guarded per entry. Bad input: exit 2.
        const options = { dryRun: yield* Config.boolean("DRY_RUN").pipe(Config.withDefault(ControllerConfig.DEFAULTS.dryRun)), output: yield* outputFormat }
        const targets = yield* Effect.either(loadTargets(cli.release!))
        if (Either.isLeft(targets)) {
          process.stderr.write(`whereabouts-controller: ${targets.left.message}\n`)
          return EXIT_USAGE
        }
        // Its Events are queued like the controller's: written before the command exits.
        const done = yield* release(targets.right, options).pipe(Effect.tap(() => Effect.flatMap(EventRecorder, (r) => r.flush)), Effect.provide(oneShot))
        process.stdout.write(`${done.text}\n`)
        return done.exitCode
      }
      case "preflight": {
        // Read-only: the stores it lists through, no informers, no Lease, no Events.
        const done = yield* preflight(yield* outputFormat, cli.serviceAccount).pipe(Effect.provide(oneShot))
        process.stdout.write(`${done.text}\n`)
        return done.exitCode
      }
      case "demo": {
        // The narration is the output; controller logs only when asked for (--log-level info).
        const { demoLayer, story } = yield* loadDemo
        return yield* story((line) => process.stdout.write(`${line}\n`)).pipe(Effect.provide(demoLayer))
      }
    }
  })

const main = (argv: ReadonlyArray<string>): void => {
  let cli: ParsedCli
  try {
    cli = withDeprecatedVariables(parseCli(argv), process.env)
  } catch (e) {
    process.stderr.write(`whereabouts-controller: ${(e as Error).message}\nTry --help.\n`)
    process.exit(EXIT_USAGE)
  }
  if (cli.help) {
    process.stdout.write(`${helpText(cli.command === "run" && !argv.includes("run") ? undefined : cli.command)}\n`)
    return
  }
  if (cli.version) {
    process.stdout.write(`${version()}\n`)
    return
  }
  // Every value checked before anything runs: one line each, naming the option as it was given.
  const problems = checkOptions(cli, process.env)
  if (problems.length > 0) {
    for (const p of problems) process.stderr.write(`whereabouts-controller: ${p}\n`)
    process.exit(EXIT_USAGE)
  }
  // Logs read well where they are read: short lines on a terminal, JSON for a collector (logging.ts).
  const logger = logging(cli.command, process.stderr.isTTY === true)
  const warned = Effect.zipRight(Effect.forEach(deprecationWarnings(cli), (w) => Effect.logWarning(w)), program(cli))
  const runnable = Effect.flatMap(logger, (layer) => Effect.provide(warned, layer)).pipe(Effect.withConfigProvider(configProvider(cli)))
  const fiber = Effect.runFork(runnable)
  let signals = 0
  const onSignal = (signal: string) => {
    signals++
    if (signals > 1) process.exit(130)
    process.stderr.write(`whereabouts-controller: ${signal} received, shutting down\n`)
    Effect.runFork(Fiber.interrupt(fiber))
  }
  process.on("SIGTERM", () => onSignal("SIGTERM"))
  process.on("SIGINT", () => onSignal("SIGINT"))
  fiber.addObserver((exit) => {
    if (Exit.isSuccess(exit)) process.exit(exit.value)
    if (Cause.isInterruptedOnly(exit.cause)) process.exit(0)
    const failure = Cause.failureOption(exit.cause)
    // A configuration the checks let through (leader election's timings) is bad usage too; anything
    // else is a command that could not complete, told apart from what a one-shot command found.
    if (failure._tag === "Some" && ConfigError.isConfigError(failure.value)) {
      for (const line of describeConfigError(failure.value)) process.stderr.write(`whereabouts-controller: ${line}\n`)
      process.exit(EXIT_USAGE)
    }
    const message = failure._tag === "None" ? Cause.pretty(exit.cause) : failure.value instanceof Error ? failure.value.message : String(failure.value)
    process.stderr.write(`whereabouts-controller: ${message}\n`)
    process.exit(exitCodeOfFailure(cli.command))
  })
}

main(process.argv.slice(2))
