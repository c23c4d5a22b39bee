import { describe, expect, it } from "vitest"
import { CRD_SPECS, type CheckRow, UPSTREAM_RUNNING, crdRow, exitCodeOf, nadRows, rbacRow, upstreamProgram, upstreamRows } from "../../src/domain/preflight.ts"
import { CONTROLLER_SERVICE_ACCOUNT } from "../../src/domain/rbac-needs.ts"
import { helpText, parseCli } from "../../src/programs/cli.ts"
import { poolRows, renderPreflight } from "../../src/programs/preflight.ts"

/** The containers of upstream's manifests as they ship (doc/crds/daemonset-install.yaml, reconciler-deployment.yaml, the chart's). */
const UPSTREAM_DAEMONSET = [
  { name: "whereabouts", command: ["/bin/sh"], args: ["-c", "SLEEP=false source /install-cni.sh\n/token-watcher.sh &\n/ip-control-loop -log-level debug\n"] }
]
const UPSTREAM_RECONCILER = [{ name: "whereabouts-reconciler", command: ["/ip-reconciler"], args: ["-log-level", "debug"] }]
const CHART_RECONCILER = [{ name: "reconciler", command: ["/ip-reconciler"], args: ["-log-level", "debug"] }]

describe("preflight verdicts", () => {
  it("a CRD: served is ok; a missing IPPool or reservation CRD fails with what to do; a missing NodeSlicePool or NAD CRD warns", () => {
    expect(crdRow(CRD_SPECS.ippools, { _tag: "Served" })).toEqual({ check: "CRD ippools.whereabouts.cni.cncf.io", result: "ok", detail: "installed and served" })
    expect(crdRow(CRD_SPECS.ippools, { _tag: "Missing" })).toEqual({
      check: "CRD ippools.whereabouts.cni.cncf.io",
      result: "fail",
      detail: "not installed: install whereabouts first, or apply deploy/components/whereabouts-crds on a test cluster"
    })
    expect(crdRow(CRD_SPECS.reservations, { _tag: "Missing" }).result).toBe("fail")
    expect(crdRow(CRD_SPECS.nodeSlicePools, { _tag: "Missing" })).toMatchObject({ result: "warn", detail: expect.stringContaining("before 0.8") })
    expect(crdRow(CRD_SPECS.nads, { _tag: "Missing" })).toMatchObject({ check: "CRD network-attachment-definitions.k8s.cni.cncf.io", result: "warn", detail: expect.stringContaining("no Multus") })
    expect(crdRow(CRD_SPECS.ippools, { _tag: "Failed", error: "list ippools kube-system: Forbidden (HTTP 403): no" })).toEqual({
      check: "CRD ippools.whereabouts.cni.cncf.io",
      result: "fail",
      detail: "not served: list ippools kube-system: Forbidden (HTTP 403): no"
    })
  })

  it("RBAC: every verb allowed is ok, naming whose access; any denied fails, naming each missing verb", () => {
    const subject = { who: "ServiceAccount kube-system/whereabouts-controller" }
    expect(rbacRow({ _tag: "Reviewed", subject, checked: 26, denied: [] })).toEqual({
      check: "RBAC",
      result: "ok",
      detail: "all 26 verbs the controller needs are allowed for ServiceAccount kube-system/whereabouts-controller"
    })
    expect(rbacRow({ _tag: "Reviewed", subject: { who: "the caller (alice)", note: "cannot review ServiceAccount kube-system/x: forbidden to create subjectaccessreviews" }, checked: 26, denied: ["patch ippools in kube-system", "delete overlappingrangeipreservations in kube-system"] })).toEqual({
      check: "RBAC",
      result: "fail",
      detail: "missing: patch ippools in kube-system, delete overlappingrangeipreservations in kube-system; for the caller (alice) (cannot review ServiceAccount kube-system/x: forbidden to create subjectaccessreviews)"
    })
    expect(rbacRow({ _tag: "Failed", subject, error: "boom" })).toMatchObject({ result: "fail", detail: "could not review the access of ServiceAccount kube-system/whereabouts-controller: boom" })
  })

  it("recognises upstream's control loop inside the DaemonSet's shell script and its reconciler as a command, and nothing else", () => {
    expect(upstreamProgram(UPSTREAM_DAEMONSET)).toBe("ip-control-loop")
    expect(upstreamProgram(UPSTREAM_RECONCILER)).toBe("ip-reconciler")
    expect(upstreamProgram(CHART_RECONCILER)).toBe("ip-reconciler")
    // A DaemonSet whose control loop was turned off (the script without its last line) only installs the plugin.
    expect(upstreamProgram([{ command: ["/bin/sh"], args: ["-c", "SLEEP=false source /install-cni.sh\n/token-watcher.sh\n"] }])).toBeUndefined()
    expect(upstreamProgram([{ command: ["/ip-control-loop-v2"] }, { args: ["echo", "see-ip-reconciler"] }])).toBeUndefined()
    expect(upstreamProgram(undefined)).toBeUndefined()
    expect(upstreamProgram([{ command: "/ip-reconciler" }])).toBeUndefined()
  })

  it("upstream rows: ok per program when none runs it; a warning per workload that does; a Deployment scaled to 0 is ok", () => {
    expect(upstreamRows([]).map((r) => `${r.check} ${r.result}`)).toEqual(["upstream ip-control-loop ok", "upstream ip-reconciler ok"])
    const rows = upstreamRows([
      { kind: "DaemonSet", namespace: "kube-system", name: "whereabouts", program: "ip-control-loop" },
      { kind: "Deployment", namespace: "kube-system", name: "whereabouts-reconciler", program: "ip-reconciler", replicas: 1 },
      { kind: "Deployment", namespace: "net", name: "wb-whereabouts-chart-reconciler", program: "ip-reconciler", replicas: 0 }
    ])
    expect(rows).toEqual([
      { check: "upstream ip-control-loop", result: "warn", detail: `DaemonSet kube-system/whereabouts: ${UPSTREAM_RUNNING}` },
      { check: "upstream ip-reconciler", result: "warn", detail: `Deployment kube-system/whereabouts-reconciler: ${UPSTREAM_RUNNING}` },
      { check: "upstream ip-reconciler", result: "ok", detail: "Deployment net/wb-whereabouts-chart-reconciler is scaled to 0" }
    ])
    expect(UPSTREAM_RUNNING).toBe("upstream's reconciler is running: safe side by side (every write is guarded), but turn it off after installing — see docs/migration.md")
    expect(upstreamRows({ error: "list daemonsets: Forbidden" }).map((r) => r.result)).toEqual(["warn", "warn"])
  })

  it("NADs: one warning per NAD that cannot be read, with why; else one ok row with the counts", () => {
    expect(nadRows({ whereabouts: 3, other: 2, issues: [] })).toEqual([{ check: "NAD configs", result: "ok", detail: "3 with whereabouts IPAM read (2 with another IPAM, none, or a config on the nodes' disks left alone)" }])
    expect(nadRows({ whereabouts: 1, other: 0, issues: [{ namespace: "a", name: "broken", why: "spec.config is not valid JSON: x" }] })).toEqual([
      { check: "NAD a/broken", result: "warn", detail: "cannot read its IPAM config: spec.config is not valid JSON: x" }
    ])
  })

  it("pools: a warning per pool at or over the threshold, with the controller's PoolNearlyFull wording; else one ok row", () => {
    const pools = [
      { name: "10.0.0.0-24", size: 254, free: 200 },
      { name: "full-10.1.0.0-28", size: 14, free: 1 },
      { name: "edge", size: 10, free: 1 },
      { name: "tiny-10.2.0.0-32", size: 0, free: 0 }
    ]
    expect(poolRows(pools, 0.9)).toEqual([
      { check: "pool full-10.1.0.0-28", result: "warn", detail: "IPPool full-10.1.0.0-28 is 93% used (13 of 14 addresses), at or over the 90% threshold" },
      { check: "pool edge", result: "warn", detail: "IPPool edge is 90% used (9 of 10 addresses), at or over the 90% threshold" }
    ])
    expect(poolRows(pools.slice(0, 1), 0.9)).toEqual([{ check: "pool usage", result: "ok", detail: "1 pool, none at or over the 90% threshold" }])
  })

  it("exit code: 0 when nothing failed, warnings included; 1 when anything failed", () => {
    const row = (result: CheckRow["result"]): CheckRow => ({ check: "x", result, detail: "" })
    expect(exitCodeOf([row("ok"), row("warn")])).toBe(0)
    expect(exitCodeOf([row("ok"), row("warn"), row("fail")])).toBe(1)
    expect(exitCodeOf([])).toBe(0)
  })
})

describe("preflight rendering", () => {
  const rows: ReadonlyArray<CheckRow> = [
    { check: "CRD ippools.whereabouts.cni.cncf.io", result: "ok", detail: "installed and served" },
    { check: "RBAC", result: "fail", detail: "missing: patch ippools in kube-system; for the caller" },
    { check: "NAD a/b", result: "warn", detail: "cannot read its IPAM config: x" }
  ]

  it("a table of CHECK, RESULT and DETAIL, then a summary that says whether to go ahead", () => {
    expect(renderPreflight(rows, "table")).toBe(
      [
        "CHECK                                 RESULT   DETAIL",
        "CRD ippools.whereabouts.cni.cncf.io   ok       installed and served",
        "RBAC                                  fail     missing: patch ippools in kube-system; for the caller",
        "NAD a/b                               warn     cannot read its IPAM config: x",
        "",
        "1 ok, 1 warning, 1 failure: not ready: fix the failures first."
      ].join("\n")
    )
    expect(renderPreflight(rows.slice(0, 1), "table").split("\n").at(-1)).toBe("1 ok, 0 warnings, 0 failures: ready.")
    expect(renderPreflight([rows[0]!, rows[2]!], "table").split("\n").at(-1)).toBe("1 ok, 1 warning, 0 failures: ready; read the warnings.")
  })

  it("-o json: one document with every check and the counts", () => {
    expect(JSON.parse(renderPreflight(rows, "json"))).toEqual({ checks: rows, summary: { ok: 1, warn: 1, fail: 1 } })
  })
})

describe("preflight's command line", () => {
  it("takes -o, the pool threshold and --as-service-account <namespace>/<name>; refuses a malformed one, and the flag on other commands", () => {
    const cli = parseCli(["preflight", "-o", "json", "--pool-usage-threshold", "0.8", "--as-service-account", "kube-system/wac"])
    expect(cli.command).toBe("preflight")
    expect(Object.fromEntries(cli.values)).toEqual({ OUTPUT: "json", POOL_USAGE_THRESHOLD: "0.8" })
    expect(cli.serviceAccount).toEqual({ namespace: "kube-system", name: "wac" })
    expect(parseCli(["preflight"]).serviceAccount).toBeUndefined()
    expect(() => parseCli(["preflight", "--as-service-account", "wac"])).toThrow(`--as-service-account "wac": expected <namespace>/<name>, e.g. kube-system/${CONTROLLER_SERVICE_ACCOUNT}`)
    expect(() => parseCli(["audit", "--as-service-account", "a/b"])).toThrow("--as-service-account is an option of the preflight command")
  })

  it("--help lists the command, its flag and its exit codes; other commands' help does not show the flag", () => {
    expect(helpText()).toMatch(/^ {2}preflight {2}before installing: /m)
    const help = helpText("preflight")
    expect(help).toContain("--as-service-account <namespace>/<name>")
    expect(help).toContain("--pool-usage-threshold")
    expect(help).not.toContain("--from-report <file>")
    expect(help).toContain("preflight 0 no check failed (warnings allowed); 1 a check failed; 2 bad usage; 3 could not complete")
    expect(helpText("audit")).not.toContain("--as-service-account")
  })
})
