#!/usr/bin/env node
/**
 * The entry point, composition only: command line → configuration → logger → layers → program.
 * SIGTERM/SIGINT interrupt the program, which stops taking work, drains and releases its lease.
 */
import { readFileSync } from "node:fs"
import { Cause, ConfigError, Data, Effect, Layer, Option } from "effect"
import * as ControllerConfig from "../services/ControllerConfig.ts"
import { layerLive } from "../services/KubeApiLive.ts"
import { EventRecorder } from "../services/EventRecorder.ts"
import * as Metrics from "../services/Metrics.ts"
import * as NadConfigs from "../services/NadConfigs.ts"
import { audit } from "./audit.ts"
import { EXIT_USAGE, type ParsedCli, checkOptions, configProvider, exitCodeOfFailure, helpText, parseCli } from "./cli.ts"
import { programKubeApi, stores, withKubeApi } from "./layers.ts"
import { logging } from "./logging.ts"
import { preflight } from "./preflight.ts"
import { ReleaseInputError, loadTargets, release } from "./release.ts"
import { runController } from "./run.ts"
import { runMain } from "./run-main.ts"

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

/** The demo lives in src/testing, which the image's bundle leaves out: loaded only for `demo`, from a source checkout. */
const DEMO_MODULE = "../testing/demo.ts"
const loadDemo = Effect.tryPromise({
  try: () => import(DEMO_MODULE) as Promise<typeof import("../testing/demo.ts")>,
  catch: (cause) => new DemoError({ message: "the demo is not part of this build: run `npm run demo` from a source checkout", cause })
})

/** The demo could not run: not in this build, or its story went wrong. */
class DemoError extends Data.TaggedError("DemoError")<{ readonly message: string; readonly cause: unknown }> {}

const configLayers = Layer.provideMerge(NadConfigs.layer, ControllerConfig.layer)

/** The one-shot commands (audit, release, preflight): the stores over the live API, metrics of their own, no informers and no Lease. */
const oneShot = stores.pipe(Layer.provideMerge(programKubeApi(layerLive)), Layer.provideMerge(Metrics.layer), Layer.provideMerge(configLayers))

/** A one-shot command run: its text printed on stdout, its exit code returned. */
const printed = <E>(command: Effect.Effect<{ readonly text: string; readonly exitCode: number }, E, Layer.Layer.Success<typeof oneShot>>) =>
  Effect.map(Effect.provide(command, oneShot), (done) => {
    process.stdout.write(`${done.text}\n`)
    return done.exitCode
  })

const outputFormat = ControllerConfig.read(ControllerConfig.OPTIONS.output)

const program = (cli: ParsedCli) =>
  Effect.gen(function* () {
    switch (cli.command) {
      case "run": {
        yield* runController.pipe(Effect.provide(withKubeApi(layerLive, Metrics.layerWithProcess).pipe(Layer.provideMerge(configLayers))))
        return 0
      }
      case "audit":
        return yield* printed(audit(yield* outputFormat))
      case "release": {
        // A one-shot next to the controller: no Lease, every write guarded per entry.
        const targets = yield* loadTargets(cli.release!)
        // Its Events are queued like the controller's: written before the command exits.
        return yield* printed(Effect.tap(release(targets, yield* outputFormat), () => Effect.flatMap(EventRecorder, (r) => r.flush)))
      }
      case "preflight":
        // Read-only: no Events.
        return yield* printed(preflight(yield* outputFormat, cli.serviceAccount))
      case "demo": {
        // The narration is the output; controller logs only when asked for (--log-level info).
        const { demoLayer, story } = yield* loadDemo
        return yield* story((line) => process.stdout.write(`${line}\n`)).pipe(
          Effect.provide(demoLayer),
          Effect.mapError((e) => new DemoError({ message: e instanceof Error ? e.message : String(e), cause: e }))
        )
      }
    }
  })

/**
 * The exit code and the line of a command that failed: bad configuration (checkOptions has named each
 * bad value before anything ran) or a report release cannot read is bad usage, the rest could not complete.
 */
const failureOf = (command: ControllerConfig.Command, cause: Cause.Cause<{ readonly message: string }>) => {
  const failure = Cause.failureOption(cause)
  const usage = Option.isSome(failure) && (ConfigError.isConfigError(failure.value) || failure.value instanceof ReleaseInputError)
  const code = usage ? EXIT_USAGE : exitCodeOfFailure(command)
  return { code, lines: [said(Option.isSome(failure) ? failure.value.message : Cause.pretty(cause))] }
}

const said = (line: string) => `whereabouts-controller: ${line}`

const main = (argv: ReadonlyArray<string>): void => {
  let cli: ParsedCli
  try {
    cli = parseCli(argv, process.env)
  } catch (e) {
    process.stderr.write(`${said((e as Error).message)}\nTry --help.\n`)
    process.exit(EXIT_USAGE)
  }
  if (cli.help || cli.version) {
    process.stdout.write(`${cli.version && !cli.help ? version() : helpText(cli.command === "run" && !argv.includes("run") ? undefined : cli.command)}\n`)
    return
  }
  const problems = checkOptions(cli, process.env)
  if (problems.length > 0) {
    for (const p of problems) process.stderr.write(`${said(p)}\n`)
    process.exit(EXIT_USAGE)
  }
  const provider = configProvider(cli)
  const configured = <A, E>(effect: Effect.Effect<A, E>) => Effect.withConfigProvider(effect, provider)
  const logger = Effect.runSync(configured(logging(cli.command, process.stderr.isTTY === true)).pipe(Effect.orDie))
  const logged = <A, E>(effect: Effect.Effect<A, E>) => configured(Effect.provide(effect, logger))
  const warned = Effect.zipRight(Effect.forEach(cli.deprecated, (w) => Effect.logWarning(w)), program(cli))
  runMain(logged(warned), {
    name: "whereabouts-controller",
    deadline: cli.command === "run" ? ControllerConfig.shutdownDeadline(Effect.runSync(configured(ControllerConfig.shutdownTimeout).pipe(Effect.orDie))) : undefined,
    onFailure: (cause) => failureOf(cli.command, cause),
    log: (line) => Effect.runSync(logged(line))
  })
}

main(process.argv.slice(2))
