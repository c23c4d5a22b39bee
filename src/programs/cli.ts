/**
 * Command line: the table of options (ControllerConfig.OPTIONS) drives parsing, `--help`, the check
 * of every value before anything runs, and the mapping of flags onto the variables the Config layer
 * reads (flags win over the environment, which wins over defaults). Commands' own arguments are
 * flags without variables.
 */
import { parseArgs } from "node:util"
import { ConfigProvider, Duration, Either } from "effect"
import { parseIP } from "../domain/ip.ts"
import type { NamedTargets } from "../domain/operator-release.ts"
import { BOOLEAN, formatDuration } from "../domain/option-values.ts"
import { splitPodRef } from "../domain/pod.ts"
import { CONTROLLER_SERVICE_ACCOUNT } from "../domain/rbac-needs.ts"
import { DEFAULT_IN_FLIGHT } from "../domain/api-flow.ts"
import { SCHEDULE_CONFIGMAP_KEY } from "../domain/ipam-config.ts"
import { API_BURST_PER_QPS, COMMANDS, type Command, LEASE_DURATION, OPTIONS, type OptionRow, RENEW_DEADLINE, RETRY_PERIOD, TUNING } from "../services/ControllerConfig.ts"

export interface OptionSpec extends Omit<OptionRow<unknown>, "default"> {
  readonly kind: "string" | "boolean"
  /** The default as `--help` and docs/options.md show it: the value, else what applies when unset. */
  readonly default: string
}

const shown = (row: OptionRow<unknown>): string =>
  row.unset ?? (Duration.isDuration(row.default) ? formatDuration(row.default) : String(row.default))

/** Every option (ControllerConfig.OPTIONS), with its default as shown. */
export const OPTION_SPECS: ReadonlyArray<OptionSpec> = Object.values<OptionRow<unknown>>(OPTIONS).map((row) => ({ ...row, kind: row.value === BOOLEAN ? "boolean" : "string", default: shown(row) }))

/** Options that are gone, and what is fixed in their place: named when given, as docs/options.md lists them. */
export const REMOVED_OPTIONS: ReadonlyArray<{ readonly flag: string; readonly env: string; readonly now: string }> = [
  { flag: "http2", env: "HTTP2", now: "HTTP/1.1 only: HTTP/2 measured no clear gain, stalled watches and once hung a shutdown in native code" },
  { flag: "api-compression", env: "API_COMPRESSION", now: "answers uncompressed: next to the API server gzip cost more CPU than it saved" },
  { flag: "max-in-flight", env: "MAX_IN_FLIGHT", now: `fixed bounds per kind of work (${Object.entries(DEFAULT_IN_FLIGHT).map(([k, n]) => `${k}=${n}`).join(",")}); cap the load with --api-qps` },
  { flag: "request-timeout", env: "REQUEST_TIMEOUT", now: `${formatDuration(TUNING.requestTimeout)} per request once sent` },
  { flag: "page-size", env: "PAGE_SIZE", now: `${TUNING.pageSize} objects per page of a full list, ${TUNING.reservationPageSize} of reservations` },
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
    const target = OPTION_SPECS.find((o) => o.flag === alias.to)!
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
  for (const o of OPTION_SPECS) options[o.flag] = o.short === undefined ? { type: o.kind } : { type: o.kind, short: o.short }
  for (const a of COMMAND_ARGUMENTS.flatMap((c) => c.args)) options[a.flag] = { type: isSwitch(a) ? "boolean" : "string", multiple: a.multiple }
  for (const a of DEPRECATED_ALIASES) options[a.flag] = { type: OPTION_SPECS.find((o) => o.flag === a.to)!.kind }
  const takesValue = new Set(Object.entries(options).flatMap(([flag, o]) => (o.type === "string" ? [`--${flag}`] : [])))
  const { values, positionals } = parseArgs({ args: joinNegativeValues(argv, takesValue), options, allowPositionals: true, allowNegative: true, strict: true })
  const [command = "run", ...rest] = positionals
  if (!(COMMANDS as ReadonlyArray<string>).includes(command)) throw new TypeError(`unknown command "${command}" (run, audit, release, preflight or demo)`)
  if (rest.length > 0) throw new TypeError(`unexpected argument "${rest[0]}"`)
  const mapped = new Map(OPTION_SPECS.flatMap((o) => (values[o.flag] === undefined ? [] : [[o.env, String(values[o.flag])] as const])))
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
  const rows = OPTION_SPECS.filter((o) => command === undefined || o.commands.includes(command))
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
export const optionName = (flag: string): string => named(OPTION_SPECS.find((o) => o.flag === flag)!, true)

/** A good value (the default, else the value type's example), written as the user wrote the bad one. */
const goodExample = (row: OptionSpec, fromFlag: boolean) => {
  const value = row.unset === undefined && row.default !== "" ? row.default : row.value.example
  return fromFlag ? `--${row.flag} ${value}` : `${row.env}=${value}`
}

/**
 * Every option's value (flag, else variable) checked by the configuration's rule: one line per bad
 * value, naming the option as the user gave it, the value, why it is refused and a good one.
 */
export const checkOptions = (cli: ParsedCli, env: Environment): ReadonlyArray<string> =>
  OPTION_SPECS.flatMap((row) => {
    const typed = cli.values.get(row.env)
    const text = typed ?? env[row.env]
    if (text === undefined) return []
    const parsed = row.value.parse(text)
    return Either.isLeft(parsed) ? [`${named(row, typed !== undefined)} ${JSON.stringify(text)}: ${parsed.left}; e.g. ${goodExample(row, typed !== undefined)}`] : []
  })
