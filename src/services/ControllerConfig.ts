/**
 * All configuration: one table declares every option (flag, variable, value type, default, help,
 * commands), from which the command line and the Config are derived; read once through effect's
 * Config (environment variables, or command-line flags mapped onto the same keys by the CLI).
 * Logic never reads process.env.
 */
import { hostname } from "node:os"
import { randomUUID } from "node:crypto"
import { Config, ConfigError, ConfigProvider, Context, Duration, Effect, Either, Layer, Option } from "effect"
import type { NeverRunsAgainPolicy } from "../domain/never-runs-again.ts"
import {
  BOOLEAN, COUNT, DURATION, LOG_FORMAT, LOG_LEVEL, NAME, NAME_OR_NONE, OPTIONAL_DURATION, OUTPUT, PATH, PERIOD, PORT, RATE, RATIO, SCHEDULE, type ValueType, formatDuration
} from "../domain/option-values.ts"

/** Constants no operator has a reason to change (BENCHMARKS.md's Decisions), in the shape so tests can shorten them. */
const tuning = {
  /** Objects per page of a full list: client-go's pager's; a page of full pods is a few MB. */
  pageSize: 500,
  /**
   * Reservations per page of a full list: one is a few hundred bytes (a podref, a container id, an
   * interface) where a pod is a few KB, so their list costs round trips more than bytes.
   */
  reservationPageSize: 5000,
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
const TEARDOWN_MARGIN = Duration.seconds(2)

/** The controller's shutdown deadline: drain (--shutdown-timeout) + lease release (RENEW_DEADLINE) + TEARDOWN_MARGIN, inside the deployment's grace of 45 s. */
export const shutdownDeadline = (shutdownTimeout: Duration.DurationInput): Duration.Duration =>
  Duration.sum(Duration.sum(shutdownTimeout, RENEW_DEADLINE), TEARDOWN_MARGIN)

export const COMMANDS = ["run", "audit", "release", "preflight", "demo"] as const
export type Command = (typeof COMMANDS)[number]
const live: ReadonlyArray<Command> = ["run", "audit", "release", "preflight"]
const runOnly: ReadonlyArray<Command> = ["run"]
/** What decides that a pod will never run again: the controller's rule, which release follows too. */
const policy: ReadonlyArray<Command> = ["run", "release"]

/** An option, declared once: the command line (src/programs/cli.ts) and the Config below are derived from it. */
export interface OptionRow<A, D extends A | undefined = A | undefined> {
  readonly flag: string
  readonly env: string
  /** The placeholder --help shows, and the parser that reads the value (option-values.ts); BOOLEAN makes a switch. */
  readonly value: ValueType<A>
  /** What an unset option reads as; undefined: none, and `unset` says what applies. */
  readonly default: D
  readonly unset?: string
  /** One an operator sets: --help and docs/options.md list these first, the tuning knobs after. */
  readonly common?: true
  /** A one-letter alias, as kubectl's `-o` for --output. */
  readonly short?: string
  readonly help: string
  readonly commands: ReadonlyArray<Command>
}
const option = <A, D extends A | undefined>(row: OptionRow<A, D>) => row

/** Every option, in the order --help and docs/options.md list them; the key is the option's in the configuration. */
export const OPTIONS = {
  kubeconfig: option({ flag: "kubeconfig", env: "KUBECONFIG", value: PATH, default: undefined, unset: "~/.kube/config, then in-cluster", common: true, help: "kubeconfig file to use", commands: live }),
  namespace: option({ flag: "namespace", env: "WHEREABOUTS_NAMESPACE", value: NAME, default: "kube-system", common: true, help: "namespace of IPPools and OverlappingRangeIPReservations", commands: live }),
  concurrentBatches: option({
    flag: "concurrent-batches", env: "CONCURRENT_BATCHES", value: COUNT, default: 4, commands: runOnly,
    help: "most batches of deleted pods being freed at once (the next is gathered while one is out): more lets a stalled API call delay fewer deletions, at the price of more concurrent writes to a slow API server"
  }),
  apiQps: option({ flag: "api-qps", env: "API_QPS", value: RATE, default: 0, help: `opt-in client-side cap on API requests per second (0: none, the API server's Priority and Fairness protects it), with bursts of ${API_BURST_PER_QPS} × the cap (kube-controller-manager's 20/30); set one for a small or shared API server`, commands: live }),
  reconcileSchedule: option({
    flag: "reconcile-schedule", env: "RECONCILE_SCHEDULE", value: SCHEDULE, default: undefined, common: true, commands: runOnly,
    unset: `the ConfigMap's, ${TUNING.scheduleFile}'s, the flat file's reconciler_cron_expression, else 30 4 * * *`,
    help: "schedule of the full orphan sweep, in whereabouts' syntax (robfig/cron: five fields, @daily, @every 1h, ?, CRON_TZ=); first of the sources listed here wins"
  }),
  scheduleConfigMap: option({
    flag: "reconcile-schedule-configmap", env: "RECONCILE_SCHEDULE_CONFIGMAP", value: NAME_OR_NONE, default: "whereabouts-config", commands: runOnly,
    help: "ConfigMap in --namespace whose key holds the schedule, read at start-up and watched: a change takes effect without a restart (\"\" to not look)"
  }),
  dryRun: option({ flag: "dry-run", env: "DRY_RUN", value: BOOLEAN, default: false, common: true, help: "sweeps report orphans and pods that will never run again are logged, but neither is freed (deleted pods still are); release prints what it would free and writes nothing", commands: ["run", "release"] }),
  leaderElect: option({ flag: "leader-elect", env: "LEADER_ELECT", value: BOOLEAN, default: true, help: `elect a leader through a Lease (run 2 replicas safely), with client-go's timings: ${formatDuration(LEASE_DURATION)} lease, ${formatDuration(RENEW_DEADLINE)} renew deadline, ${formatDuration(RETRY_PERIOD)} between attempts`, commands: runOnly }),
  leaseName: option({ flag: "lease-name", env: "LEASE_NAME", value: NAME, default: "whereabouts-gc", help: "name of the leader Lease", commands: runOnly }),
  metricsPort: option({ flag: "metrics-port", env: "METRICS_PORT", value: PORT, default: 8080, help: "port of /metrics (0 disables)", commands: runOnly }),
  healthPort: option({ flag: "health-port", env: "HEALTH_PORT", value: PORT, default: 8081, help: "port of /healthz and /readyz (0 disables)", commands: runOnly }),
  shutdownTimeout: option({ flag: "shutdown-timeout", env: "SHUTDOWN_TIMEOUT", value: DURATION, default: Duration.seconds(30), help: `on SIGTERM, how long in-flight work may finish; the whole shutdown gets this + ${formatDuration(RENEW_DEADLINE)} to release the lease + ${formatDuration(TEARDOWN_MARGIN)}, then the process exits 1`, commands: runOnly }),
  poolUsageThreshold: option({ flag: "pool-usage-threshold", env: "POOL_USAGE_THRESHOLD", value: RATIO, default: 0.9, help: "pool usage ratio that raises a Warning event on the IPPool and the pool_usage_over_threshold metric (preflight warns at it too)", commands: ["run", "preflight"] }),
  invariantInterval: option({
    flag: "invariant-interval", env: "INVARIANT_INTERVAL", value: PERIOD, default: Duration.minutes(1), commands: runOnly,
    help: "how often the leader checks, on its caches alone (no API request), that every running pod holds the addresses its status lists and that none is used twice; also after each sweep"
  }),
  invariantGrace: option({
    flag: "invariant-grace", env: "INVARIANT_GRACE", value: DURATION, default: Duration.minutes(1), commands: ["run", "audit"],
    help: "how long such a violation must last before it is reported (an ADD in progress never is); audit judges only pods Ready for this long"
  }),
  pruneSlicePools: option({
    flag: "prune-slice-pools", env: "PRUNE_SLICE_POOLS", value: BOOLEAN, default: false, commands: runOnly,
    help: "sweeps delete empty node-slice pools of nodes that no longer own their slice, once their NodeSlicePool read live confirms it (audit lists them either way)"
  }),
  freeTerminalPods: option({ flag: "free-terminal-pods", env: "FREE_TERMINAL_PODS", value: BOOLEAN, default: true, common: true, help: "free the addresses of pods that finished (phase Succeeded or Failed) while their objects remain", commands: policy }),
  freeEvictedPods: option({
    flag: "free-evicted-pods", env: "FREE_EVICTED_PODS", value: BOOLEAN, default: true, common: true, commands: policy,
    help: "free the addresses of evicted pods: by the kubelet, or by the taint manager from an unreachable node (upstream's reconciler does the latter)"
  }),
  freeOnOutOfService: option({ flag: "free-on-out-of-service", env: "FREE_ON_OUT_OF_SERVICE", value: BOOLEAN, default: true, common: true, help: "free the addresses of terminating pods on a node tainted node.kubernetes.io/out-of-service", commands: policy }),
  terminatingGrace: option({
    flag: "terminating-grace", env: "TERMINATING_GRACE", value: DURATION, default: Duration.seconds(30), commands: policy,
    help: "how long past a terminating pod's grace period its node's state (gone, out of service, not ready) counts: longer is safer against a node that comes back"
  }),
  freeOnNotReadyAfter: option({
    flag: "free-on-notready-after", env: "FREE_ON_NOTREADY_AFTER", value: OPTIONAL_DURATION, default: undefined, unset: "off", common: true, commands: policy,
    help: "opt-in: free a terminating pod's addresses once its node has been NotReady or Unknown this long (a partitioned node may still run its pods)"
  }),
  flatConfigPath: option({ flag: "flat-config", env: "FLAT_CONFIG_PATH", value: PATH, default: undefined, unset: "whereabouts' own lookup paths", help: "whereabouts.conf flat file with IPAM defaults", commands: live }),
  logLevel: option({ flag: "log-level", env: "LOG_LEVEL", value: LOG_LEVEL, default: "info", common: true, help: "debug, info, warning or error; unset, audit, release, preflight and demo log at warning (only what is wrong) and run at info", commands: COMMANDS }),
  logFormat: option({ flag: "log-format", env: "LOG_FORMAT", value: LOG_FORMAT, default: undefined, unset: "text on a terminal, else json", common: true, help: "json, logfmt or text (a line a person reads: time, level, message, key=value)", commands: COMMANDS }),
  output: option({ flag: "output", short: "o", env: "OUTPUT", value: OUTPUT, default: "table", common: true, help: "output of audit, release and preflight: table or json", commands: ["audit", "release", "preflight"] })
}

/** What an option reads as: its value type's, or undefined too for an option without a default. */
type ValueOf<O> = O extends OptionRow<infer A, infer D> ? ([D] extends [undefined] ? A | undefined : A) : never

/** An option's value: its variable (or flag) parsed by the rule the command line checks it by, else its default. */
export const read = <O extends OptionRow<unknown>>(o: O): Config.Config<ValueOf<O>> =>
  Config.string(o.env).pipe(
    Config.mapOrFail((text) => Either.mapLeft(o.value.parse(text), (why) => ConfigError.InvalidData([], `${JSON.stringify(text)}: ${why}`))),
    Config.withDefault(undefined),
    Config.map((value) => (value ?? o.default) as ValueOf<O>)
  )

/** The option the shutdown deadline is made of, read before the program starts. */
export const shutdownTimeout = read(OPTIONS.shutdownTimeout)

/** Each option of `rows` read, under its key. */
const readAll = <T extends Readonly<Record<string, OptionRow<unknown>>>>(rows: T) =>
  Config.all(Object.fromEntries(Object.entries(rows).map(([key, o]) => [key, read(o)]))) as Config.Config<{ readonly [K in keyof T]: ValueOf<T[K]> }>

/** Read by the command line itself, before any layer (logging.ts, main.ts): not the controller's configuration. */
const { logLevel: _level, logFormat: _format, output: _output, ...controllerOptions } = OPTIONS

/** Reads the configuration: every controller option, the pod's name and namespace (the Downward API's, not options) and the tuning. */
export const config = Config.all([
  readAll(controllerOptions),
  Config.option(Config.nonEmptyString("POD_NAMESPACE")),
  Config.nonEmptyString("POD_NAME").pipe(Config.withDefault(`${hostname()}_${randomUUID().slice(0, 8)}`))
]).pipe(
  // The Lease lives where the controller runs (POD_NAMESPACE), as a controller-runtime manager's does by default; not an option.
  Config.map(([options, podNamespace, identity]) => ({ ...options, ...TUNING, identity, leaseNamespace: Option.getOrElse(podNamespace, () => options.namespace) }))
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

/** Configuration from the environment (or the CLI's ConfigProvider). */
export const layer: Layer.Layer<ControllerConfig, ConfigError.ConfigError> = Layer.effect(ControllerConfig, config)

/** The defaults for tests and the demo, with a fixed identity; override what matters (ports to 0 where no endpoint is wanted). */
export const layerWith = (overrides: Partial<ControllerConfigShape> = {}): Layer.Layer<ControllerConfig> =>
  Layer.succeed(ControllerConfig, { ...unset, identity: "test-controller", ...overrides })
