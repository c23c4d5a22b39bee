/**
 * Command line: one table of options drives parsing, `--help`, the check of every value before
 * anything runs, and the mapping of flags onto the variables the Config layer reads (flags win over
 * the environment, which wins over defaults). Commands' own arguments are flags without variables.
 */
import { parseArgs } from "node:util"
import { ConfigProvider, Duration, Either } from "effect"
import { parseSchedule } from "../domain/cron.ts"
import { parseIP } from "../domain/ip.ts"
import type { NamedTargets } from "../domain/operator-release.ts"
import { BOOLEAN, COUNT, DURATION, NAME, OUTPUT_FORMATS, PATH, PERIOD, PORT, RATE, RATIO, type ValueType, formatDuration, parseChoice, parseOptionalDuration } from "../domain/option-values.ts"
import { splitPodRef } from "../domain/pod.ts"
import { CONTROLLER_SERVICE_ACCOUNT } from "../domain/rbac-needs.ts"
import { DEFAULT_IN_FLIGHT } from "../domain/api-flow.ts"
import { SCHEDULE_CONFIGMAP_KEY } from "../domain/ipam-config.ts"
import { API_BURST_PER_QPS, DEFAULTS, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD, TEARDOWN_MARGIN, TUNING } from "../services/ControllerConfig.ts"
import { LOG_FORMATS, LOG_LEVELS } from "./logging.ts"

interface OptionRow {
  readonly flag: string
  readonly env: string
  /** The placeholder --help shows, and the parser that checks the value (option-values.ts); BOOLEAN makes a switch. */
  readonly value: ValueType
  /** One an operator sets: --help and docs/options.md list these first, the tuning knobs after. */
  readonly common?: true
  /** The option's default in DEFAULTS; without one, `note` says what applies when it is unset. */
  readonly key?: keyof typeof DEFAULTS
  readonly note?: string
  /** A one-letter alias, as kubectl's `-o` for --output. */
  readonly short?: string
  readonly help: string
  readonly commands: ReadonlyArray<Command>
}

export interface OptionSpec extends OptionRow {
  readonly kind: "string" | "boolean"
  /** The default as `--help` and docs/options.md show it. */
  readonly default: string
}

const SCHEDULE: ValueType = { placeholder: "<schedule>", example: '"@every 6h"', parse: (text) => Either.mapLeft(parseSchedule(text.trim()), (e) => e.message) }
const OPTIONAL_DURATION: ValueType = { ...DURATION, example: "5m", parse: parseOptionalDuration }
const LOG_LEVEL: ValueType = { placeholder: "<level>", example: "info", parse: parseChoice(Object.keys(LOG_LEVELS), { named: 4, ignoreCase: true }) }
const LOG_FORMAT: ValueType = { placeholder: "<format>", example: "logfmt", parse: parseChoice(LOG_FORMATS) }
const OUTPUT: ValueType = { placeholder: "<format>", example: "json", parse: parseChoice(OUTPUT_FORMATS) }

const shown = (row: OptionRow): string => {
  if (row.note !== undefined) return row.note
  if (row.key === undefined) throw new Error(`option --${row.flag} has neither a default nor a note`)
  const value: unknown = DEFAULTS[row.key]
  if (Duration.isDuration(value)) return formatDuration(value)
  return String(value)
}

const COMMANDS = ["run", "audit", "release", "preflight", "demo"] as const
export type Command = (typeof COMMANDS)[number]
const live: ReadonlyArray<Command> = ["run", "audit", "release", "preflight"]
const runOnly: ReadonlyArray<Command> = ["run"]
/** What decides that a pod will never run again: the controller's rule, which release follows too. */
const policy: ReadonlyArray<Command> = ["run", "release"]

const ROWS: ReadonlyArray<OptionRow> = [
  { flag: "kubeconfig", env: "KUBECONFIG", value: PATH, common: true, note: "~/.kube/config, then in-cluster", help: "kubeconfig file to use", commands: live },
  { flag: "namespace", env: "WHEREABOUTS_NAMESPACE", value: NAME, common: true, key: "namespace", help: "namespace of IPPools and OverlappingRangeIPReservations", commands: live },
  {
    flag: "concurrent-batches", env: "CONCURRENT_BATCHES", value: COUNT, key: "concurrentBatches", commands: runOnly,
    help: "most batches of deleted pods being freed at once (the next is gathered while one is out): more lets a stalled API call delay fewer deletions, at the price of more concurrent writes to a slow API server"
  },
  { flag: "api-qps", env: "API_QPS", value: RATE, key: "apiQps", help: `opt-in client-side cap on API requests per second (0: none, the API server's Priority and Fairness protects it), with bursts of ${API_BURST_PER_QPS} × the cap (kube-controller-manager's 20/30); set one for a small or shared API server`, commands: live },
  {
    flag: "reconcile-schedule", env: "RECONCILE_SCHEDULE", value: SCHEDULE, common: true, commands: runOnly,
    note: `the ConfigMap's, ${TUNING.scheduleFile}'s, the flat file's reconciler_cron_expression, else 30 4 * * *`,
    help: "schedule of the full orphan sweep, in whereabouts' syntax (robfig/cron: five fields, @daily, @every 1h, ?, CRON_TZ=); first of the sources listed here wins"
  },
  {
    flag: "reconcile-schedule-configmap", env: "RECONCILE_SCHEDULE_CONFIGMAP", value: NAME, key: "scheduleConfigMap", commands: runOnly,
    help: "ConfigMap in --namespace whose key holds the schedule, read at start-up and watched: a change takes effect without a restart (\"\" to not look)"
  },
  { flag: "dry-run", env: "DRY_RUN", value: BOOLEAN, common: true, key: "dryRun", help: "sweeps report orphans and pods that will never run again are logged, but neither is freed (deleted pods still are); release prints what it would free and writes nothing", commands: ["run", "release"] },
  { flag: "leader-elect", env: "LEADER_ELECT", value: BOOLEAN, key: "leaderElect", help: `elect a leader through a Lease (run 2 replicas safely), with client-go's timings: ${formatDuration(LEASE_DURATION)} lease, ${formatDuration(RENEW_DEADLINE)} renew deadline, ${formatDuration(RETRY_PERIOD)} between attempts`, commands: runOnly },
  { flag: "lease-name", env: "LEASE_NAME", value: NAME, key: "leaseName", help: "name of the leader Lease", commands: runOnly },
  { flag: "metrics-port", env: "METRICS_PORT", value: PORT, key: "metricsPort", help: "port of /metrics (0 disables)", commands: runOnly },
  { flag: "health-port", env: "HEALTH_PORT", value: PORT, key: "healthPort", help: "port of /healthz and /readyz (0 disables)", commands: runOnly },
  { flag: "shutdown-timeout", env: "SHUTDOWN_TIMEOUT", value: DURATION, key: "shutdownTimeout", help: `on SIGTERM, how long in-flight work may finish; the whole shutdown gets this + ${formatDuration(RENEW_DEADLINE)} to release the lease + ${formatDuration(TEARDOWN_MARGIN)}, then the process exits 1`, commands: runOnly },
  { flag: "pool-usage-threshold", env: "POOL_USAGE_THRESHOLD", value: RATIO, key: "poolUsageThreshold", help: "pool usage ratio that raises a Warning event on the IPPool and the pool_usage_over_threshold metric (preflight warns at it too)", commands: ["run", "preflight"] },
  {
    flag: "invariant-interval", env: "INVARIANT_INTERVAL", value: PERIOD, key: "invariantInterval", commands: runOnly,
    help: "how often the leader checks, on its caches alone (no API request), that every running pod holds the addresses its status lists and that none is used twice; also after each sweep"
  },
  {
    flag: "invariant-grace", env: "INVARIANT_GRACE", value: DURATION, key: "invariantGrace", commands: ["run", "audit"],
    help: "how long such a violation must last before it is reported (an ADD in progress never is); audit judges only pods Ready for this long"
  },
  {
    flag: "prune-slice-pools", env: "PRUNE_SLICE_POOLS", value: BOOLEAN, key: "pruneSlicePools", commands: runOnly,
    help: "sweeps delete empty node-slice pools of nodes that no longer own their slice, once their NodeSlicePool read live confirms it (audit lists them either way)"
  },
  { flag: "free-terminal-pods", env: "FREE_TERMINAL_PODS", value: BOOLEAN, common: true, key: "freeTerminalPods", help: "free the addresses of pods that finished (phase Succeeded or Failed) while their objects remain", commands: policy },
  {
    flag: "free-evicted-pods", env: "FREE_EVICTED_PODS", value: BOOLEAN, common: true, key: "freeEvictedPods", commands: policy,
    help: "free the addresses of evicted pods: by the kubelet, or by the taint manager from an unreachable node (upstream's reconciler does the latter)"
  },
  { flag: "free-on-out-of-service", env: "FREE_ON_OUT_OF_SERVICE", value: BOOLEAN, common: true, key: "freeOnOutOfService", help: "free the addresses of terminating pods on a node tainted node.kubernetes.io/out-of-service", commands: policy },
  {
    flag: "terminating-grace", env: "TERMINATING_GRACE", value: DURATION, key: "terminatingGrace", commands: policy,
    help: "how long past a terminating pod's grace period its node's state (gone, out of service, not ready) counts: longer is safer against a node that comes back"
  },
  {
    flag: "free-on-notready-after", env: "FREE_ON_NOTREADY_AFTER", value: OPTIONAL_DURATION, common: true, note: "off", commands: policy,
    help: "opt-in: free a terminating pod's addresses once its node has been NotReady or Unknown this long (a partitioned node may still run its pods)"
  },
  { flag: "flat-config", env: "FLAT_CONFIG_PATH", value: PATH, note: "whereabouts' own lookup paths", help: "whereabouts.conf flat file with IPAM defaults", commands: live },
  { flag: "log-level", env: "LOG_LEVEL", value: LOG_LEVEL, common: true, key: "logLevel", help: "debug, info, warning or error; unset, audit, release, preflight and demo log at warning (only what is wrong) and run at info", commands: COMMANDS },
  { flag: "log-format", env: "LOG_FORMAT", value: LOG_FORMAT, common: true, note: "text on a terminal, else json", help: "json, logfmt or text (a line a person reads: time, level, message, key=value)", commands: COMMANDS },
  { flag: "output", short: "o", env: "OUTPUT", value: OUTPUT, common: true, key: "output", help: "output of audit, release and preflight: table or json", commands: ["audit", "release", "preflight"] }
]

/** Every option, with its default as shown. */
export const OPTIONS: ReadonlyArray<OptionSpec> = ROWS.map((row) => ({ ...row, kind: row.value === BOOLEAN ? "boolean" : "string", default: shown(row) }))

/** Options that are gone, and what is fixed in their place: named when given, as docs/options.md lists them. */
export const REMOVED_OPTIONS: ReadonlyArray<{ readonly flag: string; readonly env: string; readonly now: string }> = [
  { flag: "http2", env: "HTTP2", now: "HTTP/1.1 only: HTTP/2 measured no clear gain, stalled watches and once hung a shutdown in native code" },
  { flag: "api-compression", env: "API_COMPRESSION", now: "answers uncompressed: next to the API server gzip cost more CPU than it saved" },
  { flag: "max-in-flight", env: "MAX_IN_FLIGHT", now: `fixed bounds per kind of work (${Object.entries(DEFAULT_IN_FLIGHT).map(([k, n]) => `${k}=${n}`).join(",")}); cap the load with --api-qps` },
  { flag: "request-timeout", env: "REQUEST_TIMEOUT", now: `${formatDuration(TUNING.requestTimeout)} per request once sent` },
  { flag: "page-size", env: "PAGE_SIZE", now: `${TUNING.pageSize} objects per page of a full list` },
  { flag: "batch-window", env: "BATCH_WINDOW", now: `a mass deletion is gathered for up to ${formatDuration(TUNING.batchWindow)}, less as soon as it slows down` },
  { flag: "retry-attempts", env: "RETRY_ATTEMPTS", now: `${TUNING.retryAttempts} attempts per pod before a Warning Event; the next sweep frees what is left` },
  { flag: "retry-base-delay", env: "RETRY_BASE_DELAY", now: `retries after ${formatDuration(TUNING.retryBaseDelay)}, doubling, jittered` },
  { flag: "retry-max-delay", env: "RETRY_MAX_DELAY", now: `retries at most ${formatDuration(TUNING.retryMaxDelay)} apart` },
  { flag: "reconcile-schedule-configmap-key", env: "RECONCILE_SCHEDULE_CONFIGMAP_KEY", now: `the key whereabouts uses, ${SCHEDULE_CONFIGMAP_KEY}` },
  { flag: "lease-duration", env: "LEASE_DURATION", now: `client-go's ${formatDuration(LEASE_DURATION)}: a standby takes over a crashed leader that long after its last renewal` },
  { flag: "renew-deadline", env: "RENEW_DEADLINE", now: `client-go's ${formatDuration(RENEW_DEADLINE)}: a leader that cannot renew that long steps down` },
  { flag: "retry-period", env: "RETRY_PERIOD", now: `client-go's ${formatDuration(RETRY_PERIOD)} between attempts on the lease, jittered` },
  { flag: "lease-namespace", env: "LEASE_NAMESPACE", now: "the Lease is in the pod's namespace (POD_NAMESPACE), else in --namespace" },
  { flag: "api-burst", env: "API_BURST", now: `${API_BURST_PER_QPS} × --api-qps (kube-controller-manager's 20/30), at least 1` },
  { flag: "sweep-on-start", env: "SWEEP_ON_START", now: "a sweep always runs on becoming leader: it frees what was deleted while none led" },
  { flag: "reconcile-schedule-file", env: "RECONCILE_SCHEDULE_FILE", now: `the file whereabouts mounts its ConfigMap at, ${TUNING.scheduleFile}` },
  { flag: "bind-address", env: "BIND_ADDRESS", now: "every address: IPv6 and IPv4 (IPv4 only on a host without IPv6), so probes reach an IPv6-only pod too" }
]

/** Former names still read, each with one warning at start, until a later release removes them. */
export const DEPRECATED_ALIASES: ReadonlyArray<{ readonly flag: string; readonly env: string; readonly to: string }> = [
  { flag: "workers", env: "WORKERS", to: "concurrent-batches" }
]

type Environment = Readonly<Record<string, string | undefined>>

/**
 * The deprecated names used, each read as its option: a flag unless the new flag is given, a variable unless
 * the new flag or variable is (and only for a command that takes it). One warning per name used.
 */
const readDeprecated = (command: Command, flags: Record<string, unknown>, env: Environment, mapped: Map<string, string>): Array<string> =>
  DEPRECATED_ALIASES.flatMap((alias) => {
    const target = OPTIONS.find((o) => o.flag === alias.to)!
    const [flag, variable] = [flags[alias.flag], env[alias.env]]
    const readsVariable = variable !== undefined && variable !== "" && target.commands.includes(command) && !mapped.has(target.env) && env[target.env] === undefined
    const used = flag !== undefined ? `--${alias.flag}` : readsVariable ? alias.env : undefined
    if (used === undefined) return []
    if (!mapped.has(target.env)) mapped.set(target.env, String(flag ?? variable))
    return [`${used} is deprecated and goes in a later release: it is --${target.flag} (${target.env}) now`]
  })

/** A removed option given as a flag (`--http2`, `--no-http2`, `--http2=…`): one line naming it and what replaced it. */
const refuseRemoved = (argv: ReadonlyArray<string>): void => {
  for (const arg of argv) {
    if (arg === "--") return
    const name = /^--(?:no-)?([a-z0-9-]+)/.exec(arg)?.[1]
    const gone = REMOVED_OPTIONS.find((r) => r.flag === name)
    if (gone !== undefined) throw new TypeError(`--${gone.flag} was removed: ${gone.now} (docs/options.md, "Removed options")`)
  }
}

/**
 * A command's own arguments (release's: what to free; preflight's: whose access to review). Flags
 * only: a variable left set somewhere (FORCE=true) must never widen what a release frees.
 */
interface ArgumentSpec {
  readonly flag: string
  readonly multiple: boolean
  /** The placeholder --help shows; "" for a switch. */
  readonly value: string
  readonly help: string
}

const isSwitch = (a: ArgumentSpec): boolean => a.value === ""

export const RELEASE_ARGUMENTS: ReadonlyArray<ArgumentSpec> = [
  {
    flag: "from-report", multiple: false, value: "<file>",
    help: "free exactly the orphans an `audit --output json` report lists (- reads stdin), each re-checked live right before its write: still the same entry, still an orphan"
  },
  { flag: "pod", multiple: true, value: "<namespace>/<name>", help: "free every address this podref holds in any pool, and its reservations (repeatable)" },
  { flag: "ip", multiple: true, value: "<pool>/<ip>", help: "free one address of a pool in --namespace, e.g. 10.10.0.0-16/10.10.0.5 (repeatable)" },
  {
    flag: "force", multiple: false, value: "",
    help: "with --pod and --ip: free even what a pod of that name that may still run holds (each write is still guarded: the entry must be the one read)"
  }
]

/** Each command's own arguments, with the heading --help shows them under. */
const COMMAND_ARGUMENTS: ReadonlyArray<{ readonly command: Command; readonly title: string; readonly args: ReadonlyArray<ArgumentSpec> }> = [
  { command: "release", title: "What release frees (its own flags, no environment variables):", args: RELEASE_ARGUMENTS },
  {
    command: "preflight", title: "Whose access preflight reviews (a flag only):",
    args: [{
      flag: "as-service-account", multiple: false, value: "<namespace>/<name>",
      help: `review this ServiceAccount's access (SubjectAccessReview) instead of <--namespace>/${CONTROLLER_SERVICE_ACCOUNT}'s when that exists, else the caller's`
    }]
  }
]

/** What `release` was asked to free, checked. */
export type ReleaseTargets =
  | { readonly _tag: "Report"; readonly path: string }
  | (NamedTargets & { readonly _tag: "Named" })

/** A <namespace>/<name> flag value, checked. */
const namespacedName = (flag: string, text: string, example = "") => {
  const ref = splitPodRef(text)
  if (ref === undefined) throw new TypeError(`--${flag} "${text}": expected <namespace>/<name>${example}`)
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
  return { _tag: "Named", pods: pods.map((p) => namespacedName("pod", p)), ips: ips.map(ipTarget), force }
}

/** `--concurrent-batches -3` read as `--concurrent-batches=-3`: parseArgs would take "-3" for an option, not a value to refuse by name. */
const joinNegativeValues = (argv: ReadonlyArray<string>, takesValue: ReadonlySet<string>): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    const [arg, next] = [argv[i]!, argv[i + 1]]
    if (arg === "--") return [...out, ...argv.slice(i)]
    if (takesValue.has(arg) && next !== undefined && /^-[\d.]/.test(next)) {
      out.push(`${arg}=${next}`)
      i++
    } else out.push(arg)
  }
  return out
}

/**
 * Parses argv (without node and script) and the deprecated variables of `env`: the command, the
 * options' values keyed by their variables, release's targets, preflight's --as-service-account and
 * a warning per deprecated name given. Throws TypeError with a readable message on bad input.
 */
export const parseCli = (argv: ReadonlyArray<string>, env: Environment = {}) => {
  refuseRemoved(argv)
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string }> = { help: { type: "boolean", short: "h" }, version: { type: "boolean" } }
  for (const o of OPTIONS) options[o.flag] = o.short === undefined ? { type: o.kind } : { type: o.kind, short: o.short }
  for (const a of COMMAND_ARGUMENTS.flatMap((c) => c.args)) options[a.flag] = { type: isSwitch(a) ? "boolean" : "string", multiple: a.multiple }
  for (const a of DEPRECATED_ALIASES) options[a.flag] = { type: OPTIONS.find((o) => o.flag === a.to)!.kind }
  const takesValue = new Set(Object.entries(options).flatMap(([flag, o]) => (o.type === "string" ? [`--${flag}`] : [])))
  const { values, positionals } = parseArgs({ args: joinNegativeValues(argv, takesValue), options, allowPositionals: true, allowNegative: true, strict: true })
  const [command = "run", ...rest] = positionals
  if (!(COMMANDS as ReadonlyArray<string>).includes(command)) throw new TypeError(`unknown command "${command}" (run, audit, release, preflight or demo)`)
  if (rest.length > 0) throw new TypeError(`unexpected argument "${rest[0]}"`)
  const mapped = new Map(OPTIONS.flatMap((o) => (values[o.flag] === undefined ? [] : [[o.env, String(values[o.flag])] as const])))
  const deprecated = readDeprecated(command as Command, values, env, mapped)
  const help = values["help"] === true
  const release = command === "release" && !help ? releaseTargets(values) : undefined
  for (const c of COMMAND_ARGUMENTS) {
    const stray = c.args.find((a) => values[a.flag] !== undefined)
    if (c.command !== command && stray !== undefined) throw new TypeError(`--${stray.flag} is an option of the ${c.command} command`)
  }
  const account = values["as-service-account"] as string | undefined
  const serviceAccount = account === undefined ? undefined : namespacedName("as-service-account", account, `, e.g. kube-system/${CONTROLLER_SERVICE_ACCOUNT}`)
  return { command: command as Command, help, version: values["version"] === true, values: mapped, release, serviceAccount, deprecated }
}

export type ParsedCli = ReturnType<typeof parseCli>

/** Flags first, then the environment. */
export const configProvider = (cli: ParsedCli): ConfigProvider.ConfigProvider =>
  ConfigProvider.fromMap(new Map(cli.values)).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))

/** The exit code of bad usage (an unknown flag, a bad value), for every command. */
export const EXIT_USAGE = 2

/**
 * The exit code of a command that could not complete (the API server unreachable, forbidden, a
 * bad kubeconfig): 1 for the controller; 3 for a one-shot command, whose 1 says what it found.
 */
export const exitCodeOfFailure = (command: Command): number => (command === "run" || command === "demo" ? 1 : 3)

/** What each command's exit code means, as --help and docs/options.md state it. */
export const EXIT_CODES: ReadonlyArray<{ readonly command: Command; readonly codes: ReadonlyArray<readonly [number, string]> }> = [
  { command: "run", codes: [[0, "stopped (SIGTERM or SIGINT)"], [1, "failed"], [EXIT_USAGE, "bad usage"]] },
  {
    command: "audit",
    codes: [[0, "no orphans, no invariant violation"], [1, "orphans found (bad input alone does not count)"], [EXIT_USAGE, "bad usage"],
      [3, "could not complete (API server unreachable, forbidden, bad kubeconfig)"], [4, "invariant violations found, with or without orphans: a running pod's address is at risk"]]
  },
  {
    command: "release",
    codes: [[0, "everything asked for is free: freed now, or already free"], [1, "something is still held (refused, skipped or failed)"], [EXIT_USAGE, "bad usage, or a report it cannot read"], [3, "could not complete"]]
  },
  {
    command: "preflight",
    codes: [[0, "no check failed (warnings allowed)"], [1, "a check failed"], [EXIT_USAGE, "bad usage"], [3, "could not complete (API server unreachable, bad credentials)"]]
  }
]

/** How durations are written, as --help and docs/options.md say it. */
export const DURATION_SYNTAX = 'Durations are Go durations, as every Kubernetes component takes them: 500ms, 30s, 1m30s, 2h, 0 (effect\'s "30 seconds" works too).'

const flagText = (o: OptionSpec) => `${o.short === undefined ? "" : `-${o.short}, `}${o.kind === "boolean" ? `--${o.flag} / --no-${o.flag}` : `--${o.flag} ${o.value.placeholder}`}`
const argText = (a: ArgumentSpec) => (isSwitch(a) ? `--${a.flag}` : `--${a.flag} ${a.value}`)

/** The options --help and docs/options.md list, in their order: the common ones first, then the tuning knobs. */
export const optionGroups = (command?: Command): ReadonlyArray<{ readonly title: string; readonly rows: ReadonlyArray<OptionSpec> }> => {
  const rows = OPTIONS.filter((o) => command === undefined || o.commands.includes(command))
  return [
    { title: "Options", rows: rows.filter((o) => o.common === true) },
    { title: "Tuning (the defaults suit most clusters)", rows: rows.filter((o) => o.common !== true) }
  ].filter((g) => g.rows.length > 0)
}

/** `--help` text, generated from the option tables. */
export const helpText = (command?: Command): string => {
  const groups = optionGroups(command)
  const commandArguments = COMMAND_ARGUMENTS.filter((c) => command === undefined || c.command === command)
  const exitCodes = EXIT_CODES.filter((e) => command === undefined || e.command === command)
  const width = Math.max(...groups.flatMap((g) => g.rows.map((o) => flagText(o).length)), ...commandArguments.flatMap((c) => c.args.map((a) => argText(a).length)))
  const line = (o: OptionSpec) => `  ${flagText(o).padEnd(width)}  ${o.help}\n  ${"".padEnd(width)}  env ${o.env}, default: ${o.default}`
  const optionLines = groups.flatMap((g, i) => [...(i === 0 ? [] : [""]), `${g.title}${command === undefined ? "" : ` (${command})`}:`, ...g.rows.map(line)])
  return [
    "whereabouts-controller — frees the whereabouts IP allocations of pods that are gone or will never run again",
    "",
    "Usage: whereabouts-controller [command] [options]",
    "",
    "Commands:",
    "  run        (default) run the controller against the cluster of the kubeconfig",
    "  audit      report every pool, every orphaned allocation/reservation, invariant violations and the bad input met; free nothing",
    "  release    free by hand, through the controller's guarded release: --from-report, --pod or --ip",
    "  preflight  before installing: CRDs, RBAC, upstream's reconciler, unreadable NADs, full pools; writes nothing",
    "  demo       replay the full-pool StatefulSet story on an embedded in-memory cluster",
    "",
    ...optionLines,
    ...commandArguments.flatMap((c) => ["", c.title, ...c.args.map((a) => `  ${argText(a).padEnd(width)}  ${a.help}`)]),
    "",
    `  ${"-h, --help".padEnd(width)}  show this help`,
    `  ${"--version".padEnd(width)}  print the version`,
    "",
    DURATION_SYNTAX,
    ...(exitCodes.length === 0 ? [] : ["", "Exit codes:"]),
    ...exitCodes.map((e) => `  ${e.command.padEnd(8)} ${e.codes.map(([code, meaning]) => `${code} ${meaning}`).join("; ")}`)
  ].join("\n")
}

/** An option as the user gave it: the flag (with its variable), or the variable (with its flag). */
const named = (row: OptionSpec, fromFlag: boolean) => (fromFlag ? `--${row.flag} (${row.env})` : `${row.env} (--${row.flag})`)

/** An option named by its flag and its variable, for a message about its value: `--metrics-port (METRICS_PORT)`. */
export const optionName = (flag: string): string => named(OPTIONS.find((o) => o.flag === flag)!, true)

/** A good value (the default, else the value type's example), written as the user wrote the bad one. */
const goodExample = (row: OptionSpec, fromFlag: boolean) => {
  const value = row.key !== undefined && row.default !== "" ? row.default : row.value.example
  return fromFlag ? `--${row.flag} ${value}` : `${row.env}=${value}`
}

/**
 * Every option's value (flag, else variable) checked by the configuration's rule: one line per bad
 * value, naming the option as the user gave it, the value, why it is refused and a good one.
 */
export const checkOptions = (cli: ParsedCli, env: Environment): ReadonlyArray<string> =>
  OPTIONS.flatMap((row) => {
    const typed = cli.values.get(row.env)
    const text = typed ?? env[row.env]
    // An option without a default takes "" as unset, as the configuration does.
    if (text === undefined || (text === "" && row.key === undefined)) return []
    const parsed = row.value.parse(text)
    return Either.isLeft(parsed) ? [`${named(row, typed !== undefined)} ${JSON.stringify(text)}: ${parsed.left}; e.g. ${goodExample(row, typed !== undefined)}`] : []
  })
