/**
 * All configuration, read once through effect's Config (environment variables, or command-line
 * flags mapped onto the same keys by the CLI). Logic never reads process.env.
 */
import { hostname } from "node:os"
import { randomUUID } from "node:crypto"
import { Config, ConfigError, ConfigProvider, Context, Duration, Effect, Either, Layer, Option } from "effect"
import type { NeverRunsAgainPolicy } from "../domain/never-runs-again.ts"
import { type OutputFormat, type Parse, parseBoolean, parseCount, parseDuration, parseOptionalDuration, parsePort, parsePositiveDuration, parseRate, parseRatio } from "../domain/option-values.ts"

/** Constants no operator has a reason to change (BENCHMARKS.md's Decisions), in the shape so tests can shorten them. */
const tuning = {
  /** Objects per page of a full list: client-go's pager's; a page of full pods is a few MB. */
  pageSize: 500,
  /** One API request once sent (the --api-qps wait not counted); a longer Retry-After is not honoured. */
  requestTimeout: Duration.seconds(30),
  /** Attempts per pod before giving up with a Warning Event; the next sweep frees what is left. */
  retryAttempts: 5,
  /** First retry delay (doubling each attempt, jittered) and the longest: client-go's workqueue shape. */
  retryBaseDelay: Duration.millis(500),
  retryMaxDelay: Duration.seconds(30),
  /** How long a mass deletion that keeps arriving is gathered into one batch (Batcher.ts; 0: never). */
  batchWindow: Duration.seconds(1),
  /** The sweep's schedule file, read every minute: whereabouts' DaemonSet mounts its ConfigMap's cron-expression here; "": none. */
  scheduleFile: "/cron-schedule/config"
}

export const TUNING: Readonly<typeof tuning> = tuning

/**
 * Requests allowed at once above an --api-qps cap, per request per second of the cap:
 * kube-controller-manager's pairing (--kube-api-qps 20, --kube-api-burst 30); at least one.
 */
export const API_BURST_PER_QPS = 1.5
export const apiBurst = (qps: number): number => Math.max(1, Math.floor(qps * API_BURST_PER_QPS))

/** client-go's defaults (component-base's LeaderElectionConfiguration), not options: no operator of a GC controller needs to tune them. */
export const LEASE_DURATION = Duration.seconds(15)
export const RENEW_DEADLINE = Duration.seconds(10)
export const RETRY_PERIOD = Duration.seconds(2)

/** What the controller's shutdown deadline adds to the drain and the lease release: the rest of the teardown. */
export const TEARDOWN_MARGIN = Duration.seconds(2)

/** The controller's shutdown deadline: drain (--shutdown-timeout) + lease release (RENEW_DEADLINE) + TEARDOWN_MARGIN, inside the deployment's grace of 45 s. */
export const shutdownDeadline = (shutdownTimeout: Duration.DurationInput): Duration.Duration =>
  Duration.sum(Duration.sum(shutdownTimeout, RENEW_DEADLINE), TEARDOWN_MARGIN)

/** A value read with the parser the command line checks it with (option-values.ts): one rule for both; unset, `fallback`. */
const parsed = <A>(key: string, parse: Parse<A>, fallback: A) =>
  Config.string(key).pipe(
    Config.mapOrFail((text) => Either.mapLeft(parse(text), (why) => ConfigError.InvalidData([], `${JSON.stringify(text)}: ${why}`))),
    Config.withDefault(fallback)
  )
const optionalString = (key: string) => Config.option(Config.nonEmptyString(key)).pipe(Config.map(Option.getOrUndefined))

/** The option the shutdown deadline is made of (src/programs/cli.ts), read before the program starts. */
export const shutdownTimeout = parsed("SHUTDOWN_TIMEOUT", parseDuration, Duration.seconds(30))

/** Reads the configuration; keys are the environment variable names docs/options.md lists, each option's rule is its --help text. */
export const config = Config.all({
  namespace: Config.nonEmptyString("WHEREABOUTS_NAMESPACE").pipe(Config.withDefault("kube-system")),
  kubeconfig: optionalString("KUBECONFIG"),
  concurrentBatches: parsed("CONCURRENT_BATCHES", parseCount(1), 4),
  apiQps: parsed("API_QPS", parseRate, 0),
  /** undefined: the ConfigMap's, the file's, the flat file's, else the default. */
  reconcileSchedule: optionalString("RECONCILE_SCHEDULE"),
  /** As whereabouts 0.9 installs it; "" to not look. */
  scheduleConfigMap: Config.string("RECONCILE_SCHEDULE_CONFIGMAP").pipe(Config.withDefault("whereabouts-config")),
  dryRun: parsed("DRY_RUN", parseBoolean, false),
  leaderElect: parsed("LEADER_ELECT", parseBoolean, true),
  leaseName: Config.nonEmptyString("LEASE_NAME").pipe(Config.withDefault("whereabouts-gc")),
  podNamespace: Config.option(Config.nonEmptyString("POD_NAMESPACE")),
  identity: Config.nonEmptyString("POD_NAME").pipe(Config.withDefault(`${hostname()}_${randomUUID().slice(0, 8)}`)),
  metricsPort: parsed("METRICS_PORT", parsePort, 8080),
  healthPort: parsed("HEALTH_PORT", parsePort, 8081),
  shutdownTimeout,
  poolUsageThreshold: parsed("POOL_USAGE_THRESHOLD", parseRatio, 0.9),
  invariantInterval: parsed("INVARIANT_INTERVAL", parsePositiveDuration, Duration.minutes(1)),
  invariantGrace: parsed("INVARIANT_GRACE", parseDuration, Duration.minutes(1)),
  /** Tried before whereabouts' own lookup paths. */
  flatConfigPath: optionalString("FLAT_CONFIG_PATH"),
  pruneSlicePools: parsed("PRUNE_SLICE_POOLS", parseBoolean, false),
  freeTerminalPods: parsed("FREE_TERMINAL_PODS", parseBoolean, true),
  freeEvictedPods: parsed("FREE_EVICTED_PODS", parseBoolean, true),
  freeOnOutOfService: parsed("FREE_ON_OUT_OF_SERVICE", parseBoolean, true),
  terminatingGrace: parsed("TERMINATING_GRACE", parseDuration, Duration.seconds(30)),
  /** undefined: never. */
  freeOnNotReadyAfter: parsed("FREE_ON_NOTREADY_AFTER", parseOptionalDuration, undefined)
}).pipe(
  // The Lease lives where the controller runs (POD_NAMESPACE), as a controller-runtime manager's does by default; not an option.
  Config.map(({ podNamespace, ...rest }) => ({ ...rest, ...TUNING, leaseNamespace: Option.getOrElse(podNamespace, () => rest.namespace) }))
)

/** The options, and the tuning beside them. */
export type ControllerConfigShape = Readonly<Config.Config.Success<typeof config>>

export class ControllerConfig extends Context.Tag("whereabouts-controller/ControllerConfig")<ControllerConfig, ControllerConfigShape>() {}

/** The never-run-again rule's settings. */
export const neverRunsAgainPolicy = (c: ControllerConfigShape): NeverRunsAgainPolicy => ({
  freeTerminalPods: c.freeTerminalPods,
  freeEvictedPods: c.freeEvictedPods,
  freeOnOutOfService: c.freeOnOutOfService,
  terminatingGraceMs: Duration.toMillis(c.terminatingGrace),
  freeOnNotReadyAfterMs: c.freeOnNotReadyAfter === undefined ? undefined : Duration.toMillis(c.freeOnNotReadyAfter)
})

/** The configuration of an empty environment: every option's default. */
const unset: ControllerConfigShape = Effect.runSync(Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map())))

/**
 * The default of every option that has one, and of the command line's own (logging, audit's output):
 * --help and docs/options.md (a test checks it) show these.
 */
export const DEFAULTS = { ...unset, logLevel: "info", output: "table" as OutputFormat }

/** The defaults for tests and the demo, with a fixed identity; override what matters (ports to 0 where no endpoint is wanted). */
export const defaults = (overrides: Partial<ControllerConfigShape> = {}): ControllerConfigShape => ({ ...unset, identity: "test-controller", ...overrides })

/** Configuration from the environment (or the CLI's ConfigProvider). */
export const layer: Layer.Layer<ControllerConfig, ConfigError.ConfigError> = Layer.effect(ControllerConfig, config)

export const layerWith = (overrides: Partial<ControllerConfigShape> = {}): Layer.Layer<ControllerConfig> =>
  Layer.succeed(ControllerConfig, defaults(overrides))
