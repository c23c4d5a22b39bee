/**
 * Command line: one table of options drives parsing (node:util parseArgs), `--help`, and the
 * mapping of flags onto the environment-variable keys the Config layer reads — flags win over
 * the environment, which wins over defaults. What `release` frees is a second, smaller table of
 * flags without variables, checked here into one way of naming it.
 */
import { parseArgs } from "node:util"
import { type ConfigError, ConfigProvider, Duration } from "effect"
import { type IPAddress, parseIP } from "../domain/ip.ts"
import { splitPodRef } from "../domain/pod.ts"
import { DEFAULTS, type DefaultedKey } from "../services/ControllerConfig.ts"

interface OptionRow {
  readonly flag: string
  readonly env: string
  readonly kind: "string" | "boolean"
  /** The option's default in DEFAULTS; without one, `note` says what applies when it is unset. */
  readonly key?: DefaultedKey
  readonly note?: string
  /** A one-letter alias, as kubectl's `-o` for --output. */
  readonly short?: string
  readonly help: string
  readonly commands: ReadonlyArray<Command>
}

export interface OptionSpec extends OptionRow {
  /** The default as `--help` and the README show it. */
  readonly default: string
}

/** A duration as the flags take it: "500 millis", "1 second", "2 minutes". */
export const showDuration = (d: Duration.Duration): string => {
  const ms = Duration.toMillis(d)
  const unit = (n: number, name: string) => `${n} ${name}${n === 1 ? "" : "s"}`
  if (ms % 60_000 === 0 && ms >= 60_000) return unit(ms / 60_000, "minute")
  if (ms % 1000 === 0) return unit(ms / 1000, "second")
  return `${ms} millis`
}

const shown = (row: OptionRow): string => {
  if (row.note !== undefined) return row.note
  if (row.key === undefined) throw new Error(`option --${row.flag} has neither a default nor a note`)
  const value: unknown = DEFAULTS[row.key]
  if (Duration.isDuration(value)) return showDuration(value)
  if (typeof value === "object" && value !== null) return Object.entries(value).map(([k, v]) => `${k}=${String(v)}`).join(",")
  return String(value)
}

export type Command = "run" | "audit" | "release" | "demo"

const COMMANDS: ReadonlyArray<Command> = ["run", "audit", "release", "demo"]
const all: ReadonlyArray<Command> = COMMANDS
const live: ReadonlyArray<Command> = ["run", "audit", "release"]
const runOnly: ReadonlyArray<Command> = ["run"]
/** What decides that a pod will never run again: the controller's rule, which release follows too. */
const policy: ReadonlyArray<Command> = ["run", "release"]

const ROWS: ReadonlyArray<OptionRow> = [
  { flag: "kubeconfig", env: "KUBECONFIG", kind: "string", note: "~/.kube/config, then in-cluster", help: "kubeconfig file to use", commands: live },
  { flag: "namespace", env: "WHEREABOUTS_NAMESPACE", kind: "string", key: "namespace", help: "namespace of IPPools and OverlappingRangeIPReservations", commands: live },
  { flag: "workers", env: "WORKERS", kind: "string", key: "workers", help: "most batches of deleted pods reconciled at once; more lets a stalled API call delay fewer deletions, at the price of more concurrent writes to a slow API server", commands: runOnly },
  {
    flag: "batch-window",
    env: "BATCH_WINDOW",
    kind: "string",
    key: "batchWindow",
    help: "how long a mass deletion that keeps arriving is gathered into one batch: fewer, larger pool writes, against a later first free; 0 never waits",
    commands: runOnly
  },
  { flag: "retry-attempts", env: "RETRY_ATTEMPTS", kind: "string", key: "retryAttempts", help: "attempts per deleted pod before giving up with a Warning event", commands: runOnly },
  { flag: "retry-base-delay", env: "RETRY_BASE_DELAY", kind: "string", key: "retryBaseDelay", help: "first retry delay (doubles each attempt, jittered)", commands: runOnly },
  { flag: "retry-max-delay", env: "RETRY_MAX_DELAY", kind: "string", key: "retryMaxDelay", help: "longest retry delay", commands: runOnly },
  {
    flag: "max-in-flight",
    env: "MAX_IN_FLIGHT",
    kind: "string",
    key: "maxInFlight",
    help: "API requests in flight at once per kind of work, as kind=n,... (the kinds not named keep theirs); a 429 with Retry-After pauses its kind until then; Events go one at a time while addresses are being freed",
    commands: live
  },
  { flag: "api-qps", env: "API_QPS", kind: "string", key: "apiQps", help: "opt-in client-side cap on API requests per second (0: none, the API server's Priority and Fairness protects it); set one for a small or shared API server", commands: live },
  { flag: "api-burst", env: "API_BURST", kind: "string", key: "apiBurst", help: "API requests allowed at once above --api-qps (with a cap only)", commands: live },
  { flag: "request-timeout", env: "REQUEST_TIMEOUT", kind: "string", key: "requestTimeout", help: "timeout of one API request once sent (the wait for --api-qps not counted); a 429 or 5xx that names a Retry-After is sent again after it, up to 3 times", commands: live },
  {
    flag: "http2",
    env: "HTTP2",
    kind: "boolean",
    key: "http2",
    help: "send requests over HTTP/2 where the API server offers it (one multiplexed connection); watches stay on HTTP/1.1",
    commands: live
  },
  {
    flag: "api-compression",
    env: "API_COMPRESSION",
    kind: "boolean",
    key: "apiCompression",
    help: "ask the API server to gzip large answers (lists, big pools): less traffic for more CPU on both ends; worth it over a slow link to the API server",
    commands: live
  },
  { flag: "page-size", env: "PAGE_SIZE", kind: "string", key: "pageSize", help: "objects per page of full lists: fewer requests, against more memory per page", commands: live },
  {
    flag: "reconcile-schedule",
    env: "RECONCILE_SCHEDULE",
    kind: "string",
    note: "the ConfigMap's, the file's, the flat file's reconciler_cron_expression, else 30 4 * * *",
    help: "schedule of the full orphan sweep, in whereabouts' syntax (robfig/cron: five fields, @daily, @every 1h, ?, CRON_TZ=); first of the sources listed here wins",
    commands: runOnly
  },
  {
    flag: "reconcile-schedule-configmap",
    env: "RECONCILE_SCHEDULE_CONFIGMAP",
    kind: "string",
    key: "scheduleConfigMap",
    help: "ConfigMap in --namespace whose key holds the schedule, read at start-up and watched: a change takes effect without a restart (\"\" to not look)",
    commands: runOnly
  },
  { flag: "reconcile-schedule-configmap-key", env: "RECONCILE_SCHEDULE_CONFIGMAP_KEY", kind: "string", key: "scheduleConfigMapKey", help: "the key of that ConfigMap", commands: runOnly },
  { flag: "reconcile-schedule-file", env: "RECONCILE_SCHEDULE_FILE", kind: "string", key: "scheduleFile", help: "file holding the schedule, read when it exists and looked at again every minute", commands: runOnly },
  { flag: "sweep-on-start", env: "SWEEP_ON_START", kind: "boolean", key: "sweepOnStart", help: "sweep once when becoming leader (catches deletions missed while down)", commands: runOnly },
  { flag: "dry-run", env: "DRY_RUN", kind: "boolean", key: "dryRun", help: "sweeps report orphans and pods that will never run again are logged, but neither is freed (deleted pods still are); release prints what it would free and writes nothing", commands: ["run", "release"] },
  { flag: "leader-elect", env: "LEADER_ELECT", kind: "boolean", key: "leaderElect", help: "elect a leader through a Lease (run 2 replicas safely)", commands: runOnly },
  { flag: "lease-name", env: "LEASE_NAME", kind: "string", key: "leaseName", help: "name of the leader Lease", commands: runOnly },
  { flag: "lease-namespace", env: "LEASE_NAMESPACE", kind: "string", note: "$POD_NAMESPACE, else --namespace", help: "namespace of the leader Lease", commands: runOnly },
  { flag: "lease-duration", env: "LEASE_DURATION", kind: "string", key: "leaseDuration", help: "how long a lease is valid without renewal", commands: runOnly },
  { flag: "renew-deadline", env: "RENEW_DEADLINE", kind: "string", key: "renewDeadline", help: "the leader gives up if it cannot renew for this long", commands: runOnly },
  { flag: "retry-period", env: "RETRY_PERIOD", kind: "string", key: "retryPeriod", help: "interval of lease acquire/renew attempts", commands: runOnly },
  { flag: "metrics-port", env: "METRICS_PORT", kind: "string", key: "metricsPort", help: "port of /metrics (0 disables)", commands: runOnly },
  { flag: "health-port", env: "HEALTH_PORT", kind: "string", key: "healthPort", help: "port of /healthz and /readyz (0 disables)", commands: runOnly },
  { flag: "bind-address", env: "BIND_ADDRESS", kind: "string", note: "every address", help: "address the HTTP endpoints listen on (unset: IPv6 and IPv4 where the host has IPv6, else IPv4)", commands: runOnly },
  { flag: "shutdown-timeout", env: "SHUTDOWN_TIMEOUT", kind: "string", key: "shutdownTimeout", help: "on SIGTERM, how long in-flight work may finish; the whole shutdown gets this + --renew-deadline + 2 s, then the process exits 1", commands: runOnly },
  { flag: "pool-usage-threshold", env: "POOL_USAGE_THRESHOLD", kind: "string", key: "poolUsageThreshold", help: "pool usage ratio that raises a Warning event on the IPPool and the pool_usage_over_threshold metric", commands: runOnly },
  {
    flag: "prune-slice-pools",
    env: "PRUNE_SLICE_POOLS",
    kind: "boolean",
    key: "pruneSlicePools",
    help: "sweeps delete empty node-slice pools of nodes that no longer own their slice, once their NodeSlicePool read live confirms it (audit lists them either way)",
    commands: runOnly
  },
  { flag: "free-terminal-pods", env: "FREE_TERMINAL_PODS", kind: "boolean", key: "freeTerminalPods", help: "free the addresses of pods that finished (phase Succeeded or Failed) while their objects remain", commands: policy },
  {
    flag: "free-evicted-pods",
    env: "FREE_EVICTED_PODS",
    kind: "boolean",
    key: "freeEvictedPods",
    help: "free the addresses of evicted pods: by the kubelet, or by the taint manager from an unreachable node (upstream's reconciler does the latter)",
    commands: policy
  },
  { flag: "free-on-out-of-service", env: "FREE_ON_OUT_OF_SERVICE", kind: "boolean", key: "freeOnOutOfService", help: "free the addresses of terminating pods on a node tainted node.kubernetes.io/out-of-service", commands: policy },
  {
    flag: "terminating-grace",
    env: "TERMINATING_GRACE",
    kind: "string",
    key: "terminatingGrace",
    help: "how long past a terminating pod's grace period its node's state (gone, out of service, not ready) counts: longer is safer against a node that comes back",
    commands: policy
  },
  {
    flag: "free-on-notready-after",
    env: "FREE_ON_NOTREADY_AFTER",
    kind: "string",
    note: "off",
    help: "opt-in: free a terminating pod's addresses once its node has been NotReady or Unknown this long (a partitioned node may still run its pods)",
    commands: policy
  },
  { flag: "flat-config", env: "FLAT_CONFIG_PATH", kind: "string", note: "whereabouts' own lookup paths", help: "whereabouts.conf flat file with IPAM defaults", commands: live },
  { flag: "log-level", env: "LOG_LEVEL", kind: "string", key: "logLevel", help: "debug, info, warning or error; unset, audit, release, preflight and demo log at warning (only what is wrong) and run at info", commands: all },
  { flag: "log-format", env: "LOG_FORMAT", kind: "string", note: "text on a terminal, else json", help: "json, logfmt or text (a line a person reads: time, level, message, key=value)", commands: all },
  { flag: "output", short: "o", env: "OUTPUT", kind: "string", key: "output", help: "output of audit and release: table or json", commands: ["audit", "release"] }
]

/** Every option, with its default as shown. */
export const OPTIONS: ReadonlyArray<OptionSpec> = ROWS.map((row) => ({ ...row, default: shown(row) }))

/**
 * The release command's own arguments: what to free. Flags only, no environment variables — a
 * variable left set somewhere (a FORCE=true, say) must never widen what a release frees.
 */
export interface ArgumentSpec {
  readonly flag: string
  readonly kind: "string" | "boolean"
  readonly multiple: boolean
  /** What the value looks like, as --help and the README show it ("" for a boolean). */
  readonly value: string
  readonly help: string
}

export const RELEASE_ARGUMENTS: ReadonlyArray<ArgumentSpec> = [
  {
    flag: "from-report",
    kind: "string",
    multiple: false,
    value: "<file>",
    help: "free exactly the orphans an `audit --output json` report lists (- reads stdin), each re-checked live right before its write: still the same entry, still an orphan"
  },
  { flag: "pod", kind: "string", multiple: true, value: "<namespace>/<name>", help: "free every address this podref holds in any pool, and its reservations (repeatable)" },
  { flag: "ip", kind: "string", multiple: true, value: "<pool>/<ip>", help: "free one address of a pool in --namespace, e.g. 10.10.0.0-16/10.10.0.5 (repeatable)" },
  {
    flag: "force",
    kind: "boolean",
    multiple: false,
    value: "",
    help: "with --pod and --ip: free even what a pod of that name that may still run holds (each write is still guarded: the entry must be the one read)"
  }
]

/** What `release` was asked to free, checked. */
export type ReleaseTargets =
  | { readonly _tag: "Report"; readonly path: string }
  | {
      readonly _tag: "Named"
      readonly pods: ReadonlyArray<{ readonly namespace: string; readonly name: string }>
      readonly ips: ReadonlyArray<{ readonly pool: string; readonly ip: IPAddress }>
      readonly force: boolean
    }

export interface ParsedCli {
  readonly command: Command
  readonly help: boolean
  readonly version: boolean
  /** Flag values keyed by their environment variable name. */
  readonly values: ReadonlyMap<string, string>
  /** `release` only. */
  readonly release?: ReleaseTargets | undefined
}

const podTarget = (text: string) => {
  const ref = splitPodRef(text)
  if (ref === undefined) throw new TypeError(`--pod "${text}": expected <namespace>/<name>`)
  return ref
}

const ipTarget = (text: string) => {
  const slash = text.indexOf("/")
  if (slash <= 0) throw new TypeError(`--ip "${text}": expected <pool>/<ip>, e.g. 10.10.0.0-16/10.10.0.5`)
  const [pool, address] = [text.slice(0, slash), text.slice(slash + 1)]
  const ip = parseIP(address)
  if (ip === undefined) throw new TypeError(`--ip "${text}": "${address}" is not an IP address (expected <pool>/<ip>, e.g. 10.10.0.0-16/10.10.0.5)`)
  return { pool, ip }
}

/** release's arguments, checked: one way of naming what to free, --force only where it means something. */
const releaseTargets = (values: Record<string, unknown>): ReleaseTargets => {
  const report = values["from-report"] as string | undefined
  const pods = (values["pod"] as Array<string> | undefined) ?? []
  const ips = (values["ip"] as Array<string> | undefined) ?? []
  const force = values["force"] === true
  if (report !== undefined && (pods.length > 0 || ips.length > 0)) throw new TypeError("release: --from-report cannot be combined with --pod or --ip")
  if (report !== undefined && force) throw new TypeError("release: --force applies to --pod and --ip only (a report's orphans are freed by the sweep's rule)")
  if (report !== undefined) {
    if (report === "") throw new TypeError("release: --from-report needs a file (or - for stdin)")
    return { _tag: "Report", path: report }
  }
  if (pods.length === 0 && ips.length === 0) throw new TypeError("release: say what to free with --from-report <file>, --pod <namespace>/<name> or --ip <pool>/<ip>")
  return { _tag: "Named", pods: pods.map(podTarget), ips: ips.map(ipTarget), force }
}

/** Parses argv (without node and script); throws TypeError with a readable message on bad input. */
export const parseCli = (argv: ReadonlyArray<string>): ParsedCli => {
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string }> = { help: { type: "boolean", short: "h" }, version: { type: "boolean" } }
  for (const o of OPTIONS) options[o.flag] = o.short === undefined ? { type: o.kind } : { type: o.kind, short: o.short }
  for (const a of RELEASE_ARGUMENTS) options[a.flag] = { type: a.kind, multiple: a.multiple }
  const { values, positionals } = parseArgs({ args: [...argv], options, allowPositionals: true, allowNegative: true, strict: true })
  const [command = "run", ...rest] = positionals
  if (!(COMMANDS as ReadonlyArray<string>).includes(command)) throw new TypeError(`unknown command "${command}" (run, audit, release or demo)`)
  if (rest.length > 0) throw new TypeError(`unexpected argument "${rest[0]}"`)
  const mapped = new Map<string, string>()
  for (const o of OPTIONS) {
    const v = values[o.flag]
    if (v !== undefined) mapped.set(o.env, String(v))
  }
  const help = values["help"] === true
  const stray = RELEASE_ARGUMENTS.find((a) => values[a.flag] !== undefined)
  if (command !== "release" && stray !== undefined) throw new TypeError(`--${stray.flag} is an option of the release command`)
  const release = command === "release" && !help ? releaseTargets(values) : undefined
  return { command: command as Command, help, version: values["version"] === true, values: mapped, release }
}

/** Flags first, then the environment. */
export const configProvider = (cli: ParsedCli): ConfigProvider.ConfigProvider =>
  ConfigProvider.fromMap(new Map(cli.values)).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))

/** `--help` text, generated from the option tables. */
export const helpText = (command?: Command): string => {
  const rows = OPTIONS.filter((o) => command === undefined || o.commands.includes(command))
  const flagText = (o: OptionSpec) => `${o.short === undefined ? "" : `-${o.short}, `}${o.kind === "boolean" ? `--${o.flag} / --no-${o.flag}` : `--${o.flag} <value>`}`
  const argText = (a: ArgumentSpec) => (a.kind === "boolean" ? `--${a.flag}` : `--${a.flag} ${a.value}`)
  const releasing = command === undefined || command === "release"
  const width = Math.max(...rows.map((o) => flagText(o).length), ...(releasing ? RELEASE_ARGUMENTS.map((a) => argText(a).length) : []))
  const lines = rows.map((o) => `  ${flagText(o).padEnd(width)}  ${o.help}\n  ${"".padEnd(width)}  env ${o.env}, default: ${o.default}`)
  const releaseLines = releasing
    ? ["", "What release frees (its own flags, no environment variables):", ...RELEASE_ARGUMENTS.map((a) => `  ${argText(a).padEnd(width)}  ${a.help}`)]
    : []
  return [
    "whereabouts-controller — frees the whereabouts IP allocations of pods that are gone or will never run again",
    "",
    "Usage: whereabouts-controller [command] [options]",
    "",
    "Commands:",
    "  run      (default) run the controller against the cluster of the kubeconfig",
    "  audit    report every pool and every orphaned allocation/reservation, free nothing;",
    "           exit code 1 when orphans exist",
    "  release  free by hand, through the controller's guarded release: --from-report, --pod or --ip;",
    "           exit code 0 when all was freed, 1 when something was skipped or refused, 2 on bad input",
    "  demo     replay the full-pool StatefulSet story on an embedded in-memory cluster",
    "",
    `Options${command === undefined ? "" : ` (${command})`}:`,
    ...lines,
    ...releaseLines,
    "",
    `  ${"-h, --help".padEnd(width)}  show this help`,
    `  ${"--version".padEnd(width)}  print the version`,
    "",
    "Durations are written like \"500 millis\", \"30 seconds\", \"2 minutes\"."
  ].join("\n")
}

/**
 * A configuration error as one line per key: "WORKERS: Expected an integer value but received
 * "zero"". effect's own rendering also lists, for every option with a default, the "missing"
 * alternative the default stands for, which reads as if the option were required.
 */
export const describeConfigError = (error: ConfigError.ConfigError): string => {
  const leaves: Array<{ readonly key: string; readonly missing: boolean; readonly message: string }> = []
  const walk = (e: ConfigError.ConfigError): void => {
    switch (e._op) {
      case "And":
      case "Or":
        walk(e.left)
        walk(e.right)
        return
      default:
        leaves.push({ key: e.path.join("."), missing: e._op === "MissingData", message: e.message })
    }
  }
  walk(error)
  const wrong = new Set(leaves.filter((l) => !l.missing).map((l) => l.key))
  const lines = leaves.filter((l) => !(l.missing && wrong.has(l.key))).map((l) => (l.key === "" ? l.message : `${l.key}: ${l.message}`))
  return [...new Set(lines)].join("; ")
}
