import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect } from "effect"
import { parse as parseYaml } from "yaml"
import {
  DEPRECATED_ALIASES,
  DURATION_SYNTAX,
  EXIT_CODES,
  EXIT_USAGE,
  OPTION_SPECS,
  type OptionSpec,
  RELEASE_ARGUMENTS,
  REMOVED_OPTIONS,
  checkOptions,
  configProvider,
  exitCodeOfFailure,
  helpText,
  optionGroups,
  parseCli
} from "../../src/programs/cli.ts"
import { formatDuration } from "../../src/domain/option-values.ts"
import { TUNING, apiBurst, config, shutdownDeadline } from "../../src/services/ControllerConfig.ts"
import { tableRows } from "../support/markdown.ts"

describe("command line", () => {
  it("maps flags onto their environment keys; flags win over the environment", () => {
    const cli = parseCli(["run", "--concurrent-batches", "7", "--no-leader-elect", "--namespace=pools", "--dry-run"])
    expect(cli.command).toBe("run")
    expect(Object.fromEntries(cli.values)).toEqual({ CONCURRENT_BATCHES: "7", LEADER_ELECT: "false", WHEREABOUTS_NAMESPACE: "pools", DRY_RUN: "true" })
    process.env["CONCURRENT_BATCHES"] = "3"
    process.env["API_QPS"] = "55"
    try {
      const c = Effect.runSync(Effect.withConfigProvider(config, configProvider(cli)))
      expect(c).toMatchObject({ concurrentBatches: 7, leaderElect: false, namespace: "pools", dryRun: true, apiQps: 55, leaseNamespace: "pools" })
    } finally {
      delete process.env["CONCURRENT_BATCHES"]
      delete process.env["API_QPS"]
    }
  })

  it("defaults to run; rejects unknown commands, flags and stray arguments", () => {
    expect(parseCli([]).command).toBe("run")
    expect(() => parseCli(["serve"])).toThrow(/unknown command "serve"/)
    expect(() => parseCli(["--frobnicate"])).toThrow()
    expect(() => parseCli(["audit", "extra"])).toThrow(/unexpected argument "extra"/)
  })

  it("a removed option given as a flag is one line naming it and what replaced it; docs/options.md lists each", () => {
    for (const argv of [["--http2"], ["run", "--no-http2"], ["audit", "--api-compression=true"], ["run", "--lease-duration", "30s"]]) {
      expect(() => parseCli(argv)).toThrow(/^--(http2|api-compression|lease-duration) was removed: .+ \(docs\/options\.md, "Removed options"\)$/)
    }
    // After --, nothing is an option.
    expect(() => parseCli(["audit", "--", "--http2"])).toThrow(/unexpected argument "--http2"/)
    const [rows] = tablesOf(optionsDoc(), "option | variable")
    expect(rows).toEqual(REMOVED_OPTIONS.map((r) => [`--${r.flag}`, r.env, r.now]))
  })

  it("--workers and WORKERS still set --concurrent-batches, each said deprecated once; the new name wins over the old", () => {
    const flag = parseCli(["run", "--workers", "6"])
    expect(flag.values.get("CONCURRENT_BATCHES")).toBe("6")
    expect(flag.deprecated).toEqual(["--workers is deprecated and goes in a later release: it is --concurrent-batches (CONCURRENT_BATCHES) now"])
    const variable = parseCli(["run"], { WORKERS: "5" })
    expect(variable.values.get("CONCURRENT_BATCHES")).toBe("5")
    expect(variable.deprecated).toEqual(["WORKERS is deprecated and goes in a later release: it is --concurrent-batches (CONCURRENT_BATCHES) now"])
    expect(Effect.runSync(Effect.withConfigProvider(config, configProvider(variable))).concurrentBatches).toBe(5)
    // The new name, as a flag or a variable, wins; the old one is then not read.
    expect(parseCli(["--concurrent-batches", "2", "--workers", "6"]).values.get("CONCURRENT_BATCHES")).toBe("2")
    const both = parseCli(["run"], { WORKERS: "5", CONCURRENT_BATCHES: "3" })
    expect([both.values.has("CONCURRENT_BATCHES"), both.deprecated]).toEqual([false, []])
    expect(parseCli(["run", "--concurrent-batches", "2"]).deprecated).toEqual([])
    // A variable left set in the environment is no concern of a command without that option.
    expect(parseCli(["audit"], { WORKERS: "5" }).deprecated).toEqual([])
    const [rows] = tablesOf(optionsDoc(), "former name | variable")
    expect(rows).toEqual(DEPRECATED_ALIASES.map((a) => [`--${a.flag}`, a.env, `--${a.to}`]))
  })

  it("takes -o for --output (as kubectl does) and -h for --help", () => {
    expect(Object.fromEntries(parseCli(["audit", "-o", "json"]).values)).toEqual({ OUTPUT: "json" })
    expect(Object.fromEntries(parseCli(["release", "-ojson", "--pod", "ns/a"]).values)).toEqual({ OUTPUT: "json" })
    expect(parseCli(["audit", "-h"]).help).toBe(true)
    expect(helpText("audit")).toMatch(/^ {2}-o, --output <format> /m)
    expect(() => parseCli(["audit", "-x"])).toThrow()
  })

  it("reads durations in Go's syntax and in effect's, and rejects bad values with the key named", () => {
    const read = (args: ReadonlyArray<string>) => Effect.runSync(Effect.withConfigProvider(config, configProvider(parseCli([...args]))))
    const ok = read(["--terminating-grace", "250 millis", "--shutdown-timeout", "1 minute"])
    expect(Duration.toMillis(ok.terminatingGrace)).toBe(250)
    const go = read(["--shutdown-timeout", "1m30s", "--invariant-grace=20s", "--terminating-grace", "1.5h", "--free-on-notready-after", "0"])
    expect([go.shutdownTimeout, go.invariantGrace, go.terminatingGrace, go.freeOnNotReadyAfter!].map(Duration.toMillis)).toEqual([90_000, 20_000, 5_400_000, 0])
    const bad = Effect.runSyncExit(Effect.withConfigProvider(config, configProvider(parseCli(["--concurrent-batches", "zero"]))))
    expect(bad._tag).toBe("Failure")
    expect(JSON.stringify(bad)).toContain("CONCURRENT_BATCHES")
  })

  it("no cap on the request rate by default; the tuning is fixed, whatever the environment says", () => {
    const read = (env: Record<string, string>) => Effect.runSync(Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map(Object.entries(env)))))
    expect(read({}).apiQps).toBe(0)
    // A cap's burst is kube-controller-manager's 1.5 × (20/30); at 1 request per second and below, one at a time.
    expect([apiBurst(20), apiBurst(500), apiBurst(1), apiBurst(0.5)]).toEqual([30, 750, 1, 1])
    expect(read({ PAGE_SIZE: "7", BATCH_WINDOW: "5s", RETRY_ATTEMPTS: "9" })).toMatchObject(TUNING)
    // A variable of a removed option is not read: nothing in the configuration differs.
    expect(read({ LEASE_DURATION: "1s", RENEW_DEADLINE: "1h", RETRY_PERIOD: "0", LEASE_NAMESPACE: "leases", API_BURST: "1", SWEEP_ON_START: "false", RECONCILE_SCHEDULE_FILE: "/etc/sweep", BIND_ADDRESS: "127.0.0.1" })).toEqual(read({}))
    // The Lease is in the pod's namespace; outside a pod, beside the pools.
    expect([read({ POD_NAMESPACE: "wac", WHEREABOUTS_NAMESPACE: "pools" }).leaseNamespace, read({ WHEREABOUTS_NAMESPACE: "pools" }).leaseNamespace]).toEqual(["wac", "pools"])
  })

  it("--help documents every option with its environment variable", () => {
    const help = helpText()
    for (const o of OPTION_SPECS) {
      expect(help).toContain(`--${o.flag}`)
      expect(help).toContain(`env ${o.env}`)
    }
    expect(helpText("demo")).not.toContain("--concurrent-batches")
    for (const a of RELEASE_ARGUMENTS) {
      expect(helpText()).toContain(`--${a.flag}`)
      expect(helpText("release")).toContain(a.help)
      expect(helpText("audit").split("\n").filter((l) => l.startsWith(`  --${a.flag} `) || l === `  --${a.flag}`)).toEqual([])
    }
    expect(helpText("release")).toContain("--dry-run")
    expect(helpText("release")).not.toContain("--concurrent-batches")
  })

  const operating = () => readFileSync(new URL("../../docs/operating.md", import.meta.url), "utf8")
  const section = (title: string) => {
    const text = operating()
    const start = text.indexOf(`## ${title}`)
    return text.slice(start, text.indexOf("\n## ", start + 1))
  }

  it("docs/operating.md's table of release flags is the command's, flag by flag", () => {
    expect(tableRows(section("release: freeing by hand"), "flag")).toEqual(RELEASE_ARGUMENTS.map((a) => [`--${a.flag}`, a.value, a.help.replaceAll("`", "")]))
  })

  it("docs/operating.md's RBAC table for release is deploy/operator/release-clusterrole.yaml, verb by verb", () => {
    const role = parseYaml(readFileSync(new URL("../../deploy/operator/release-clusterrole.yaml", import.meta.url), "utf8")) as {
      kind: string
      rules: Array<{ resources: Array<string>; verbs: Array<string> }>
    }
    expect(role.kind).toBe("ClusterRole")
    const documented = tableRows(section("release: freeing by hand"), "resource").map(([resource, verbs]) => [resource, verbs])
    expect(documented).toEqual(role.rules.map((r) => [r.resources.join(", "), r.verbs.join(", ")]))
  })

  const optionsDoc = () => readFileSync(new URL("../../docs/options.md", import.meta.url), "utf8")
  /** Every markdown table of `text` whose header starts with `header`: its rows as cells without backticks. */
  const tablesOf = (text: string, header: string) => {
    const tables: Array<Array<Array<string>>> = []
    let rows: Array<Array<string>> | undefined
    for (const l of text.split("\n")) {
      if (l.startsWith(`| ${header} |`)) tables.push((rows = []))
      else if (rows !== undefined && l.startsWith("|") && !l.startsWith("|---")) rows.push(l.split("|").slice(1, -1).map((c) => c.trim().replaceAll("`", "")))
      else if (!l.startsWith("|")) rows = undefined
    }
    return tables
  }

  it("docs/options.md has one row per option, grouped and ordered as --help shows them, with its flag, value type, variable and default", () => {
    const tables = tablesOf(optionsDoc(), "flag | value").map((rows) => rows.map((cells) => cells.slice(0, 4)))
    const expected = (o: OptionSpec) => [`--${o.flag}${o.short === undefined ? "" : `, -${o.short}`}`, o.kind === "boolean" ? "" : o.value.placeholder, o.env, o.default]
    expect(tables).toEqual(optionGroups().map((g) => g.rows.map(expected)))
    expect(readFileSync(new URL("../../README.md", import.meta.url), "utf8")).toContain("[docs/options.md](docs/options.md)")
  })

  it("docs/options.md states the exit codes --help states", () => {
    const [rows] = tablesOf(optionsDoc(), "command | exit code")
    expect(rows).toEqual(EXIT_CODES.flatMap((e) => e.codes.map(([code, meaning]) => [e.command, String(code), meaning])))
    for (const e of EXIT_CODES) expect(helpText(e.command)).toContain(`  ${e.command.padEnd(8)} ${e.codes.map(([code, meaning]) => `${code} ${meaning}`).join("; ")}`)
  })

  it("--help shows the defaults Config applies", () => {
    const applied = Effect.runSync(Effect.withConfigProvider(config, configProvider(parseCli([]))))
    const shownFor = (flag: string) => OPTION_SPECS.find((o) => o.flag === flag)!.default
    expect(shownFor("concurrent-batches")).toBe(String(applied.concurrentBatches))
    expect(shownFor("terminating-grace")).toBe(formatDuration(applied.terminatingGrace))
    expect(shownFor("terminating-grace")).toBe("30s")
    expect(shownFor("api-qps")).toBe(String(applied.apiQps))
    expect(shownFor("dry-run")).toBe(String(applied.dryRun))
  })
})

/**
 * A value each option's type refuses (a type that refuses nothing is listed as such), given by
 * flag and by environment variable: the error is one line naming the option as it was given, the
 * value and a good one, and the configuration refuses the same value by the same rule.
 */
const REFUSED: Readonly<Record<string, string | null>> = {
  "<duration>": "1d",
  "<count>": "-3",
  "<port>": "99999",
  "<qps>": "-1",
  "<ratio>": "1.5",
  "<name>": null,
  "<schedule>": "@often",
  "<level>": "loud",
  "<format>": "yaml",
  "": "maybe",
  "<path>": null
}

describe("configuration errors", () => {
  const readConfig = (env: Record<string, string>) => Effect.runSyncExit(Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map(Object.entries(env)))))
  // Read by the command line itself (logging, output), not by ControllerConfig.
  const notInConfig = new Set(["LOG_LEVEL", "LOG_FORMAT", "OUTPUT"])
  const refusable = (o: OptionSpec) => {
    const bad = REFUSED[o.value.placeholder]
    expect(bad, `a refused sample for ${o.value.placeholder} (--${o.flag})`).not.toBe(undefined)
    return bad ?? undefined
  }

  it("every configuration error names its flag and variable, the value and a good one, by flag and by environment variable", () => {
    let checked = 0
    for (const o of OPTION_SPECS) {
      const bad = refusable(o)
      if (bad === undefined) continue
      checked++
      const byEnv = checkOptions(parseCli([]), { [o.env]: bad })
      expect(byEnv, o.env).toHaveLength(1)
      expect(byEnv[0]!.startsWith(`${o.env} (--${o.flag}) ${JSON.stringify(bad)}: `), byEnv[0]).toBe(true)
      expect(byEnv[0]).not.toContain("\n")
      const good = byEnv[0]!.slice(byEnv[0]!.lastIndexOf(`e.g. ${o.env}=`) + `e.g. ${o.env}=`.length)
      expect(checkOptions(parseCli([]), { [o.env]: good.replace(/^"(.*)"$/, "$1") }), `${o.env}'s example ${good}`).toEqual([])
      if (o.kind === "string") {
        const byFlag = checkOptions(parseCli([`--${o.flag}`, bad]), { [o.env]: "ignored: the flag wins" })
        expect(byFlag, o.flag).toHaveLength(1)
        expect(byFlag[0]!.startsWith(`--${o.flag} (${o.env}) ${JSON.stringify(bad)}: `), byFlag[0]).toBe(true)
        expect(byFlag[0]).toContain(`; e.g. --${o.flag} `)
      }
      if (!notInConfig.has(o.env)) {
        const read = readConfig({ [o.env]: bad })
        expect(read._tag, `ControllerConfig refuses ${o.env}=${bad}`).toBe("Failure")
      }
    }
    // Every option but names and paths, which take any text.
    expect(checked).toBe(OPTION_SPECS.filter((o) => !["<name>", "<path>"].includes(o.value.placeholder)).length)
  })

  it("a value that starts with a dash is a value, refused by name, not another flag", () => {
    expect(parseCli(["--concurrent-batches", "-3"]).values.get("CONCURRENT_BATCHES")).toBe("-3")
    expect(parseCli(["--concurrent-batches=-3"]).values.get("CONCURRENT_BATCHES")).toBe("-3")
    expect(checkOptions(parseCli(["run", "--concurrent-batches", "-3"]), {})).toEqual(['--concurrent-batches (CONCURRENT_BATCHES) "-3": must be at least 1; e.g. --concurrent-batches 4'])
    expect(checkOptions(parseCli(["--terminating-grace", "-1s"]), {})).toEqual(['--terminating-grace (TERMINATING_GRACE) "-1s": a duration cannot be negative; e.g. --terminating-grace 30s'])
    expect(parseCli(["release", "--from-report", "-"]).release).toEqual({ _tag: "Report", path: "-" })
    // A flag followed by another flag still lacks its value.
    expect(() => parseCli(["--concurrent-batches", "--dry-run"])).toThrow(/--concurrent-batches/)
  })

  it("a port out of range, a negative rate, a threshold outside (0, 1] and an empty count are refused by name", () => {
    expect(checkOptions(parseCli(["--metrics-port", "99999", "--api-qps", "-1", "--pool-usage-threshold", "0"]), { CONCURRENT_BATCHES: "" })).toEqual([
      'CONCURRENT_BATCHES (--concurrent-batches) "": not a whole number; e.g. CONCURRENT_BATCHES=4',
      '--api-qps (API_QPS) "-1": cannot be negative (0: no cap); e.g. --api-qps 0',
      '--metrics-port (METRICS_PORT) "99999": not a port (0 to 65535; 0 turns it off); e.g. --metrics-port 8080',
      '--pool-usage-threshold (POOL_USAGE_THRESHOLD) "0": not a ratio above 0 and at most 1; e.g. --pool-usage-threshold 0.9'
    ])
  })

  it("an option without a default, or a name, takes \"\" as unset, as the configuration does; good values pass", () => {
    const cli = parseCli(["--kubeconfig", "", "--free-on-notready-after", "", "--namespace", "", "--shutdown-timeout", "1m30s", "--log-level", "WARN"])
    expect(checkOptions(cli, { FLAT_CONFIG_PATH: "" })).toEqual([])
    const read = Effect.runSync(Effect.withConfigProvider(config, configProvider(cli)))
    expect(read).toMatchObject({ kubeconfig: undefined, freeOnNotReadyAfter: undefined, namespace: "kube-system" })
  })
})

describe("--help", () => {
  it("leads with the options an operator sets, then the tuning knobs under a heading, each with its value type", () => {
    const help = helpText()
    const tuning = help.indexOf("\nTuning (the defaults suit most clusters):\n")
    expect(tuning).toBeGreaterThan(0)
    const [common, knobs] = optionGroups()
    expect(common!.rows.map((o) => o.flag)).toEqual(
      expect.arrayContaining(["kubeconfig", "namespace", "dry-run", "reconcile-schedule", "log-level", "log-format", "free-terminal-pods", "free-evicted-pods", "free-on-out-of-service", "free-on-notready-after"])
    )
    for (const o of common!.rows) expect(help.indexOf(`--${o.flag} `), o.flag).toBeLessThan(tuning)
    for (const o of knobs!.rows) expect(help.indexOf(`  --${o.flag} `), o.flag).toBeGreaterThan(tuning)
    for (const o of OPTION_SPECS.filter((r) => r.kind === "string")) expect(help).toContain(`--${o.flag} ${o.value.placeholder} `)
    expect(help).toContain(DURATION_SYNTAX)
  })

  it("the controller's shutdown deadline: --shutdown-timeout + leader election's 10 s renew deadline + 2 s", () => {
    expect(Duration.format(shutdownDeadline(Duration.seconds(30)))).toBe("42s")
  })

  it("states the exit codes: bad usage is 2 everywhere, a one-shot command that could not complete 3, the controller 1", () => {
    expect(EXIT_USAGE).toBe(2)
    expect(exitCodeOfFailure("audit")).toBe(3)
    expect(exitCodeOfFailure("release")).toBe(3)
    expect(exitCodeOfFailure("run")).toBe(1)
    const audit = EXIT_CODES.find((e) => e.command === "audit")!.codes.map(([code]) => code)
    expect(audit).toEqual([0, 1, 2, 3, 4])
    expect(helpText("audit")).toContain("Exit codes:\n  audit    0 no orphans, no invariant violation; 1 orphans found")
    expect(helpText("audit")).toContain("; 4 invariant violations found, with or without orphans")
  })
})

