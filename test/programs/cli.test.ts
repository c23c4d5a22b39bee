import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { parse as parseYaml } from "yaml"
import { OPTIONS, RELEASE_ARGUMENTS, configProvider, describeConfigError, helpText, parseCli, showDuration } from "../../src/programs/cli.ts"
import { config } from "../../src/services/ControllerConfig.ts"

describe("command line", () => {
  it("maps flags onto their environment keys; flags win over the environment", () => {
    const cli = parseCli(["run", "--workers", "7", "--no-leader-elect", "--namespace=pools", "--dry-run"])
    expect(cli.command).toBe("run")
    expect(Object.fromEntries(cli.values)).toEqual({ WORKERS: "7", LEADER_ELECT: "false", WHEREABOUTS_NAMESPACE: "pools", DRY_RUN: "true" })
    process.env["WORKERS"] = "3"
    process.env["API_QPS"] = "55"
    try {
      const c = Effect.runSync(Effect.withConfigProvider(config, configProvider(cli)))
      expect(c).toMatchObject({ workers: 7, leaderElect: false, namespace: "pools", dryRun: true, apiQps: 55, leaseNamespace: "pools" })
    } finally {
      delete process.env["WORKERS"]
      delete process.env["API_QPS"]
    }
  })

  it("defaults to run; rejects unknown commands, flags and stray arguments", () => {
    expect(parseCli([]).command).toBe("run")
    expect(() => parseCli(["serve"])).toThrow(/unknown command "serve"/)
    expect(() => parseCli(["--frobnicate"])).toThrow()
    expect(() => parseCli(["audit", "extra"])).toThrow(/unexpected argument "extra"/)
  })

  it("takes -o for --output (as kubectl does) and -h for --help", () => {
    expect(Object.fromEntries(parseCli(["audit", "-o", "json"]).values)).toEqual({ OUTPUT: "json" })
    expect(Object.fromEntries(parseCli(["release", "-ojson", "--pod", "ns/a"]).values)).toEqual({ OUTPUT: "json" })
    expect(parseCli(["audit", "-h"]).help).toBe(true)
    expect(helpText("audit")).toMatch(/^ {2}-o, --output <value> /m)
    expect(() => parseCli(["audit", "-x"])).toThrow()
  })

  it("reads durations and rejects bad values with the key named", () => {
    const ok = Effect.runSync(Effect.withConfigProvider(config, configProvider(parseCli(["--retry-base-delay", "250 millis", "--shutdown-timeout", "1 minute"]))))
    expect(ok.retryBaseDelay.toString()).toContain("250")
    const bad = Effect.runSyncExit(Effect.withConfigProvider(config, configProvider(parseCli(["--workers", "zero"]))))
    expect(bad._tag).toBe("Failure")
    expect(JSON.stringify(bad)).toContain("WORKERS")
  })

  it("refuses lease timings client-go refuses, at start-up, with the values; not without leader election", () => {
    const read = (args: ReadonlyArray<string>) => Effect.runSyncExit(Effect.withConfigProvider(config, configProvider(parseCli([...args]))))
    const bad = read(["--lease-duration", "10 seconds", "--renew-deadline", "10 seconds"])
    expect(bad._tag).toBe("Failure")
    expect(JSON.stringify(bad)).toContain("LEASE_DURATION > RENEW_DEADLINE > 1.2 × RETRY_PERIOD > 0 (got 10s, 10s, 2s)")
    expect(read(["--renew-deadline", "2 seconds"])._tag).toBe("Failure") // not above 1.2 × 2 s
    expect(read(["--renew-deadline", "3 seconds"])._tag).toBe("Success")
    expect(read(["--no-leader-elect", "--lease-duration", "1 second"])._tag).toBe("Success")
  })

  it("a configuration error reads as one line per key, without the defaults' 'missing' alternatives", () => {
    const error = (args: ReadonlyArray<string>) => {
      const exit = Effect.runSyncExit(Effect.flip(Effect.withConfigProvider(config, configProvider(parseCli([...args])))))
      if (exit._tag === "Failure") throw new Error("the configuration was read")
      return describeConfigError(exit.value)
    }
    expect(error(["--workers", "zero", "--retry-base-delay", "soon"])).toBe(
      'WORKERS: Expected an integer value but received "zero"; RETRY_BASE_DELAY: Expected a duration but received "soon"'
    )
    expect(error(["--renew-deadline", "20 seconds"])).toBe("leader election needs LEASE_DURATION > RENEW_DEADLINE > 1.2 × RETRY_PERIOD > 0 (got 15s, 20s, 2s)")
    expect(error(["--max-in-flight", "events=4,pools=3"])).toContain('MAX_IN_FLIGHT: unknown kind "pools" (kinds: pool-writes, reservations, pod-reads, events, lists, leader-election, other)')
    expect(error(["--api-qps=-1"])).toContain("API_QPS must be ≥ 0 (0: no client-side cap)")
  })

  it("--max-in-flight changes the kinds it names; no cap on the request rate by default", () => {
    const read = (args: ReadonlyArray<string>) => Effect.runSync(Effect.withConfigProvider(config, configProvider(parseCli([...args]))))
    expect(read(["--max-in-flight", "events=2"]).maxInFlight).toMatchObject({ events: 2, "pool-writes": 8 })
    expect(read([]).apiQps).toBe(0)
  })

  it("--help documents every option with its environment variable", () => {
    const help = helpText()
    for (const o of OPTIONS) {
      expect(help).toContain(`--${o.flag}`)
      expect(help).toContain(`env ${o.env}`)
    }
    expect(helpText("demo")).not.toContain("--workers")
    for (const a of RELEASE_ARGUMENTS) {
      expect(helpText()).toContain(`--${a.flag}`)
      expect(helpText("release")).toContain(a.help)
      expect(helpText("audit").split("\n").filter((l) => l.startsWith(`  --${a.flag} `) || l === `  --${a.flag}`)).toEqual([])
    }
    expect(helpText("release")).toContain("--dry-run")
    expect(helpText("release")).not.toContain("--workers")
  })

  const readme = () => readFileSync(new URL("../../README.md", import.meta.url), "utf8")
  const section = (title: string) => {
    const text = readme()
    const start = text.indexOf(`## ${title}`)
    return text.slice(start, text.indexOf("\n## ", start + 1))
  }
  /** The rows of the first markdown table in `text` whose header starts with `header`, as cells without backticks. */
  const tableRows = (text: string, header: string) => {
    const lines = text.split("\n")
    const start = lines.findIndex((l) => l.startsWith(`| ${header} |`))
    const rows: Array<Array<string>> = []
    for (const l of lines.slice(start + 2)) {
      if (!l.startsWith("|")) break
      rows.push(l.split("|").slice(1, -1).map((c) => c.trim().replaceAll("`", "")))
    }
    return rows
  }

  it("the README's table of release flags is the command's, flag by flag", () => {
    expect(tableRows(section("Freeing by hand"), "flag")).toEqual(RELEASE_ARGUMENTS.map((a) => [`--${a.flag}`, a.value, a.help.replaceAll("`", "")]))
  })

  it("the README's RBAC table for release is deploy/operator/release-clusterrole.yaml, verb by verb", () => {
    const role = parseYaml(readFileSync(new URL("../../deploy/operator/release-clusterrole.yaml", import.meta.url), "utf8")) as {
      kind: string
      rules: Array<{ resources: Array<string>; verbs: Array<string> }>
    }
    expect(role.kind).toBe("ClusterRole")
    const readmeRows = tableRows(section("Freeing by hand"), "resource").map(([resource, verbs]) => [resource, verbs])
    expect(readmeRows).toEqual(role.rules.map((r) => [r.resources.join(", "), r.verbs.join(", ")]))
  })

  it("the README's options table has one row per option, with its flag, variable and default as --help shows them", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
    const section = readme.slice(readme.indexOf("## Options"), readme.indexOf("\n## ", readme.indexOf("## Options") + 1))
    const plain = (cell: string) => cell.trim().replaceAll("`", "").replace(/ \((audit|release)(, (audit|release))*\)$/, "")
    const rows = section
      .split("\n")
      .filter((l) => l.startsWith("| `--"))
      .map((l) => l.split(" | ").slice(0, 3).map((c) => plain(c.replace(/^\| /, ""))))
    expect(rows).toEqual(OPTIONS.map((o) => [`--${o.flag}`, o.env, o.default]))
  })

  it("--help shows the defaults Config applies", () => {
    const applied = Effect.runSync(Effect.withConfigProvider(config, configProvider(parseCli([]))))
    const shownFor = (flag: string) => OPTIONS.find((o) => o.flag === flag)!.default
    expect(shownFor("workers")).toBe(String(applied.workers))
    expect(shownFor("retry-base-delay")).toBe(showDuration(applied.retryBaseDelay))
    expect(shownFor("batch-window")).toBe("1 second")
    expect(shownFor("api-qps")).toBe(String(applied.apiQps))
    expect(shownFor("sweep-on-start")).toBe(String(applied.sweepOnStart))
  })
})
