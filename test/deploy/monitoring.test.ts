/**
 * deploy/components/monitoring: the alerts pass `promtool check rules` and their unit tests
 * (test/deploy/rules.test.yaml, a firing and a quiet case each), every alert has a runbook in
 * docs/runbooks.md, every metric and label the alerts and the dashboard query is one the controller
 * exports (its registry built as the program builds it, then every metric touched), and the
 * component composes with deploy/ into a ServiceMonitor of the metrics Service, the rules and the
 * dashboard ConfigMap for Grafana's sidecar.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import { parse, stringify } from "yaml"
import * as Metrics from "../../src/services/Metrics.ts"
import { exposedSeries, missingRefs, queryRefs } from "./support/promql.ts"
import { DEPLOY, type Obj, ROOT, findGoAsset, findKubectl, idOf, kustomize, kustomizeWith, needAll } from "./support/tools.ts"

const MONITORING = join(DEPLOY, "components/monitoring")
const RULE: Obj = parse(readFileSync(join(MONITORING, "prometheusrule.yaml"), "utf8"))
const DASHBOARD_TEXT = readFileSync(join(MONITORING, "dashboard.json"), "utf8")
const DASHBOARD: Obj = JSON.parse(DASHBOARD_TEXT)
const RUNBOOKS = readFileSync(join(ROOT, "docs/runbooks.md"), "utf8")
const RUNBOOK_BASE = "https://github.com/whereabouts-controller/whereabouts-controller/blob/main/docs/runbooks.md"

const rules = (): Array<Obj> => (RULE["spec"]["groups"] as Array<Obj>).flatMap((g) => g["rules"] as Array<Obj>)
const alerts = (): Array<Obj> => rules().filter((r) => typeof r["alert"] === "string")
const panels = (): Array<Obj> => DASHBOARD["panels"] as Array<Obj>
const panelExprs = (): Array<{ readonly where: string; readonly expr: string }> =>
  panels().flatMap((p) => (p["targets"] as Array<Obj>).map((t) => ({ where: `panel "${p["title"]}" ${t["refId"]}`, expr: String(t["expr"]) })))

/** The controller's metrics as `run` builds them (Metrics.layerWithProcess), with every metric touched once so its series exist. */
const exportedByController = Effect.gen(function* () {
  const m = yield* Metrics.Metrics
  // Keyed by MetricsShape: a new metric method fails to compile here until it is touched too.
  const touch: { readonly [K in Exclude<keyof Metrics.MetricsShape, "render" | "value">]: Effect.Effect<void> } = {
    ipsFreed: m.ipsFreed("deletion", 1),
    reservationsDeleted: m.reservationsDeleted("deletion", 1),
    failure: m.failure("RetriesExhausted"),
    freeBatchDuration: m.freeBatchDuration(0.01),
    queueAtScrape: Effect.scoped(m.queueAtScrape(Effect.succeed([1, 1] as const))),
    retry: m.retry(),
    apiRequest: m.apiRequest("list", "pods", "200", 0.01),
    queueWait: m.queueWait(0.01),
    leader: m.leader(true),
    pools: m.pools([{ pool: "10.0.0.0-24", size: 254, used: 1, free: 253 }], 0.9),
    orphans: m.orphans("allocation", 1, false),
    sweep: m.sweep("success"),
    invariantViolations: m.invariantViolations({ "live-not-held": 1, "held-for-another": 0, duplicate: 0, "reservation-drift": 0 }),
    informersAtScrape: m.informersAtScrape([{ resource: { plural: "pods" }, restarts: () => 1 }]),
    events: m.events("written", 1),
    eventQueue: m.eventQueue(0),
    apiInFlight: m.apiInFlight("pool-writes", 0),
    apiPaused: m.apiPaused("events", 1)
  }
  yield* Effect.all(Object.values(touch), { discard: true })
  return exposedSeries((yield* m.render).body)
}).pipe(Effect.provide(Metrics.layerWithProcess))

/** GitHub's anchor of a Markdown heading. */
const anchorOf = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-")

/** docs/runbooks.md, one "## <alert>" section per alert. */
const runbooks = (): string => RUNBOOKS

describe("what the alerts and the dashboard query", () => {
  let series: ReadonlyMap<string, ReadonlySet<string>> = new Map()
  beforeAll(async () => void (series = await Effect.runPromise(exportedByController)))

  it("the check itself notices a metric or label the controller does not export", () => {
    expect(series.get("whereabouts_controller_ips_freed_total")).toEqual(new Set(["trigger"]))
    expect(missingRefs('sum by (trigger) (rate(whereabouts_controller_ips_freed_totl{job=~"$job"}[$__rate_interval]))', series)).toEqual([
      "metric whereabouts_controller_ips_freed_totl is not exported",
      "no metric of the query has the label trigger it groups or joins by"
    ])
    expect(missingRefs("sum by (reason) (rate(whereabouts_controller_ips_freed_total[5m]))", series)).toEqual([
      "no metric of the query has the label reason it groups or joins by"
    ])
    expect(missingRefs('whereabouts_controller_failures_total{cause="RetriesExhausted"}', series)).toEqual(["whereabouts_controller_failures_total has no label cause"])
    expect(queryRefs("absent(whereabouts_controller_leader) or max(x offset 15m) < 1").selectors.map((s) => s.metric)).toEqual(["whereabouts_controller_leader", "x"])
  })

  it("every metric and label an alert uses is one the controller exports", () => {
    expect(alerts().length).toBeGreaterThanOrEqual(6)
    const problems = alerts().flatMap((a) => missingRefs(String(a["expr"]), series).map((p) => `${a["alert"]}: ${p}`))
    expect(problems).toEqual([])
  })

  it("every metric and label a dashboard panel or variable uses is one the controller exports", () => {
    const problems = panelExprs().flatMap(({ where, expr }) => missingRefs(expr, series).map((p) => `${where}: ${p}`))
    for (const v of DASHBOARD["templating"]["list"] as Array<Obj>) {
      if (v["type"] !== "query") continue
      const m = /^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*(\w+)\s*\)$/.exec(String(v["query"]["query"]))
      expect(m, `variable ${v["name"]} is a label_values() query`).not.toBeNull()
      problems.push(...missingRefs(m![1]!, series).map((p) => `variable ${v["name"]}: ${p}`))
    }
    expect(panelExprs().length).toBeGreaterThan(10)
    expect(problems).toEqual([])
  })

  it("every panel query is limited to the chosen job: process metrics come from every target", () => {
    const unfiltered = panelExprs().flatMap(({ where, expr }) =>
      queryRefs(expr)
        .selectors.filter((s) => !s.labels.includes("job"))
        .map((s) => `${where}: ${s.metric}`)
    )
    expect(unfiltered).toEqual([])
  })

  it("the dashboard shows pool usage, IPs freed by trigger, queue depth and wait, API requests by verb and code, reconcile latency, memory and invariant violations by kind", () => {
    const uses = (metric: string, by: ReadonlyArray<string> = []) =>
      panelExprs().some(({ expr }) => {
        const refs = queryRefs(expr)
        return refs.selectors.some((s) => s.metric === metric) && by.every((l) => refs.grouping.includes(l))
      })
    const wanted: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
      ["whereabouts_controller_pool_size", ["pool"]],
      ["whereabouts_controller_pool_free", ["pool"]],
      ["whereabouts_controller_ips_freed_total", ["trigger"]],
      ["whereabouts_controller_workqueue_depth", []],
      ["whereabouts_controller_workqueue_queue_duration_seconds_bucket", ["le"]],
      ["whereabouts_controller_api_requests_total", ["verb", "code"]],
      ["whereabouts_controller_free_batch_duration_seconds_bucket", ["le"]],
      ["process_resident_memory_bytes", []],
      ["whereabouts_controller_invariant_violations", ["kind"]]
    ]
    expect(wanted.filter(([metric, by]) => !uses(metric, by))).toEqual([])
  })

  it("the dashboard is one Grafana can import: unique panel ids, each panel on the chosen data source, unique refIds", () => {
    expect(DASHBOARD["uid"]).toBe("whereabouts-controller")
    const ids = panels().map((p) => p["id"])
    expect(new Set(ids).size).toBe(ids.length)
    const variables = (DASHBOARD["templating"]["list"] as Array<Obj>).map((v) => `${v["name"]}:${v["type"]}`)
    expect(variables).toEqual(["datasource:datasource", "job:query"])
    for (const p of panels()) {
      expect(p["datasource"], String(p["title"])).toEqual({ type: "prometheus", uid: "${datasource}" })
      expect(p["gridPos"], String(p["title"])).toMatchObject({ w: expect.any(Number), h: expect.any(Number), x: expect.any(Number), y: expect.any(Number) })
      const refIds = (p["targets"] as Array<Obj>).map((t) => t["refId"])
      expect(new Set(refIds).size, String(p["title"])).toBe(refIds.length)
    }
  })
})

describe("the alerts' runbooks", () => {
  it("every alert has a severity, a summary, a description and a runbook_url pointing at its section of docs/runbooks.md", () => {
    const section = runbooks()
    const headings = new Map([...section.matchAll(/^#{2,4} (.+)$/gm)].map((m) => [anchorOf(m[1]!), m.index!]))
    for (const a of alerts()) {
      const name = String(a["alert"])
      expect(["info", "warning", "critical"], name).toContain(a["labels"]?.["severity"])
      expect(a["annotations"]?.["summary"], name).toEqual(expect.any(String))
      expect(a["annotations"]?.["description"], name).toEqual(expect.any(String))
      const url = String(a["annotations"]?.["runbook_url"])
      expect(url, name).toBe(`${RUNBOOK_BASE}#${anchorOf(name)}`)
      const at = headings.get(anchorOf(name))
      expect(at, `docs/runbooks.md has a heading ${name}`).toBeDefined()
      const body = section.slice(at!, section.indexOf("\n#", at! + 1) === -1 ? undefined : section.indexOf("\n#", at! + 1))
      for (const part of ["**What it means.**", "**What to check.**", "**What to do.**"]) expect(body, `${name}: ${part}`).toContain(part)
    }
  })
})

const found = needAll("test/deploy/monitoring.test.ts", { promtool: findGoAsset("promtool.sh", "PROMTOOL"), kubectl: findKubectl() })
const suite = "reason" in found ? describe.skip : describe
const tool = (k: "promtool" | "kubectl"): string => ("reason" in found ? "" : found[k])

suite(`the rules under promtool, the component under kustomize${"reason" in found ? ` — skipped: ${found.reason}` : ""}`, () => {
  /** The PrometheusRule's spec as a Prometheus rule file, next to a copy of rules.test.yaml. */
  const withRuleFiles = <A>(body: (dir: string) => A): A => {
    const dir = mkdtempSync(join(tmpdir(), "wac-promtool-"))
    try {
      writeFileSync(join(dir, "rules.yaml"), stringify(RULE["spec"]))
      writeFileSync(join(dir, "rules.test.yaml"), readFileSync(join(ROOT, "test/deploy/rules.test.yaml")))
      return body(dir)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  const promtool = (dir: string, args: ReadonlyArray<string>) => execFileSync(tool("promtool"), [...args], { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

  it("promtool check rules: every expression parses, no lint finding", () => {
    const out = withRuleFiles((dir) => promtool(dir, ["check", "rules", "--lint=all", "--lint-fatal", "rules.yaml"]))
    expect(out).toContain(`SUCCESS: ${rules().length} rules found`)
  })

  it("promtool test rules: every case of test/deploy/rules.test.yaml passes", () => {
    const out = withRuleFiles((dir) => promtool(dir, ["test", "rules", "rules.test.yaml"]))
    expect(out).toContain("SUCCESS")
  })

  it("every alert has a case where it fires and one where it stays quiet; no case names an alert that does not exist", () => {
    const tests = parse(readFileSync(join(ROOT, "test/deploy/rules.test.yaml"), "utf8")) as Obj
    const cases = (tests["tests"] as Array<Obj>).flatMap((t) => (t["alert_rule_test"] ?? []) as Array<Obj>)
    const names = alerts().map((a) => String(a["alert"]))
    expect(cases.map((c) => c["alertname"]).filter((n) => !names.includes(n))).toEqual([])
    for (const name of names) {
      const mine = cases.filter((c) => c["alertname"] === name)
      expect(mine.some((c) => (c["exp_alerts"] ?? []).length > 0), `${name} fires somewhere`).toBe(true)
      expect(mine.some((c) => (c["exp_alerts"] ?? []).length === 0), `${name} stays quiet somewhere`).toBe(true)
    }
  })

  it("the component adds a ServiceMonitor of deploy/'s metrics Service, the rules and the dashboard ConfigMap, in kube-system", () => {
    const base = kustomize(tool("kubectl"), DEPLOY)
    const composed = kustomizeWith(tool("kubectl"), ["monitoring"])
    const added = composed.filter((o) => !base.some((b) => idOf(b) === idOf(o)))
    expect(added.map(idOf).toSorted()).toEqual([
      "ConfigMap/kube-system/whereabouts-gc-dashboard",
      "PrometheusRule/kube-system/whereabouts-gc",
      "ServiceMonitor/kube-system/whereabouts-gc"
    ])
    expect(composed).toHaveLength(base.length + 3)
    const service = base.find((o) => o["kind"] === "Service")!
    const monitor = added.find((o) => o["kind"] === "ServiceMonitor")!
    const selected = Object.entries(monitor["spec"]["selector"]["matchLabels"] as Record<string, string>)
    expect(selected.every(([k, v]) => service["metadata"]["labels"][k] === v), "the ServiceMonitor selects the metrics Service").toBe(true)
    expect(monitor["spec"]["namespaceSelector"], "it looks in its own namespace, the Service's").toBeUndefined()
    const ports = (service["spec"]["ports"] as Array<Obj>).map((p) => p["name"])
    expect((monitor["spec"]["endpoints"] as Array<Obj>).map((e) => e["port"])).toEqual(["metrics"])
    expect(ports).toContain("metrics")
    const dashboard = added.find((o) => o["kind"] === "ConfigMap")!
    expect(dashboard["metadata"]["labels"]["grafana_dashboard"]).toBe("1")
    expect(dashboard["data"]).toEqual({ "whereabouts-controller.json": DASHBOARD_TEXT })
    expect(added.find((o) => o["kind"] === "PrometheusRule")!["spec"]).toEqual(RULE["spec"])
  })
})
