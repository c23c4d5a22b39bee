/**
 * charts/whereabouts-controller: `helm lint`, and `helm template` compared object by object with
 * `kubectl kustomize` of deploy/ (and its components), RBAC held to deploy/'s pinned rows with the
 * names and namespaces that follow the configuration, every controller option of `run` reachable
 * as a documented value that the controller's Config then reads, the other values applied, and
 * bad values refused with a message naming them. helm comes from scripts/helm.sh, kubectl from the
 * envtest assets. The server-side dry run of the rendered chart is in test/live/manifests.test.ts.
 */
import { lstatSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { Duration } from "effect"
import { parse, parseDocument, isMap, isScalar } from "yaml"
import { OPTION_SPECS } from "../../src/programs/cli.ts"
import { TUNING } from "../../src/services/ControllerConfig.ts"
import { decodeConfig, resolveEnv } from "./support/config.ts"
import { CHART, DEPLOY, EXPECTED_RBAC, type Obj, RELEASE, ROOT, findGoAsset, findKubectl, helm, helmTemplate, idOf, kustomize, kustomizeWith, needAll, parseObjects, rbacRows } from "./support/tools.ts"

const found = needAll("test/deploy/chart.test.ts", { helm: findGoAsset("helm.sh", "HELM"), kubectl: findKubectl() })
const tool = (k: "helm" | "kubectl"): string => ("reason" in found ? "" : found[k])

/**
 * What differs by nature between the two renderings, removed from both before comparing:
 * app.kubernetes.io/managed-by (Helm / kustomize), helm.sh/chart and app.kubernetes.io/instance
 * (helm's release labels, in metadata only, never in selectors), and the CRDs'
 * helm.sh/resource-policy: keep (so that `helm uninstall` never deletes a CRD and its IPPools).
 * Everything else must be equal.
 */
const HELM_ONLY_LABELS = ["app.kubernetes.io/managed-by", "helm.sh/chart", "app.kubernetes.io/instance"]
const normalise = (o: Obj): Obj => {
  const copy = structuredClone(o)
  const meta = copy["metadata"] as Obj
  for (const l of HELM_ONLY_LABELS) delete meta["labels"]?.[l]
  if (copy["kind"] === "CustomResourceDefinition" && meta["annotations"] !== undefined) {
    delete meta["annotations"]["helm.sh/resource-policy"]
    if (Object.keys(meta["annotations"]).length === 0) delete meta["annotations"]
  }
  return copy
}

/** Both renderings hold the same objects, and each pair is equal once normalised. */
const expectSameObjects = (chart: ReadonlyArray<Obj>, kustomized: ReadonlyArray<Obj>) => {
  expect(chart.map(idOf).toSorted()).toEqual(kustomized.map(idOf).toSorted())
  for (const k of kustomized) expect(normalise(chart.find((c) => idOf(c) === idOf(k))!), idOf(k)).toEqual(normalise(k))
}

const kind = (objects: ReadonlyArray<Obj>, k: string): Array<Obj> => objects.filter((o) => o["kind"] === k)
const theOne = (objects: ReadonlyArray<Obj>, k: string): Obj => {
  const all = kind(objects, k)
  expect(all, `exactly one ${k}`).toHaveLength(1)
  return all[0]!
}
const containerOf = (objects: ReadonlyArray<Obj>): Obj => theOne(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
const envOf = (objects: ReadonlyArray<Obj>): Record<string, string> =>
  Object.fromEntries((containerOf(objects)["env"] as Array<Obj>).filter((e) => typeof e["value"] === "string").map((e) => [e["name"], e["value"]]))

/** `helm template` with a values file (typed values, as a user writes them). */
const withValues = (values: Obj, extra: ReadonlyArray<string> = []) => {
  const dir = mkdtempSync(join(tmpdir(), "wac-chart-"))
  try {
    writeFileSync(join(dir, "values.yaml"), JSON.stringify(values))
    return helm(tool("helm"), ["template", RELEASE, CHART, "--namespace", "kube-system", "-f", join(dir, "values.yaml"), ...extra])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
const renderValues = (values: Obj): Array<Obj> => {
  const run = withValues(values)
  if (run.code !== 0) throw new Error(`helm template failed: ${run.stderr}`)
  return parseObjects(run.stdout, "helm template output")
}

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())
const RUN_OPTIONS = OPTION_SPECS.filter((o) => o.commands.includes("run"))

/** A value for every option of `run` that differs from its default, as a user writes it in values.yaml. */
const SAMPLE: Readonly<Record<string, string | number | boolean>> = {
  kubeconfig: "/etc/whereabouts-controller/kubeconfig",
  namespace: "pools",
  "concurrent-batches": 8,
  "api-qps": 12.5,
  "reconcile-schedule": "@every 6h",
  "reconcile-schedule-configmap": "sweep-schedule",
  "dry-run": true,
  // Off needs one replica (the chart refuses two without it): the test sets replicas 1.
  "leader-elect": false,
  "lease-name": "wac-lease",
  "metrics-port": 9090,
  "health-port": 9091,
  "shutdown-timeout": "20 seconds",
  "pool-usage-threshold": 0.75,
  "invariant-interval": "30s",
  "invariant-grace": "2 minutes",
  "prune-slice-pools": true,
  "free-terminal-pods": false,
  "free-evicted-pods": false,
  "free-on-out-of-service": false,
  "terminating-grace": "1 minute",
  // effect's spelling, still accepted
  "free-on-notready-after": "10 minutes",
  "flat-config": "/etc/whereabouts/whereabouts.conf",
  "log-level": "debug",
  "log-format": "logfmt"
}
const sampleConfig = (): Obj => Object.fromEntries(RUN_OPTIONS.map((o) => [camel(o.flag), SAMPLE[o.flag]]))

const suite = "reason" in found ? describe.skip : describe
suite(`charts/whereabouts-controller (helm template vs kubectl kustomize)${"reason" in found ? ` — skipped: ${found.reason}` : ""}`, () => {
  const kustomized = () => kustomize(tool("kubectl"), DEPLOY)
  const ALL_ON = ["crds.whereabouts=true", "crds.networkAttachmentDefinition=true", "serviceMonitor.enabled=true", "prometheusRule.enabled=true", "dashboard.enabled=true"]

  it("helm lint --strict passes with the defaults and with every object turned on", () => {
    for (const sets of [[], ALL_ON]) {
      const run = helm(tool("helm"), ["lint", "--strict", CHART, "--namespace", "kube-system", ...sets.flatMap((s) => ["--set", s])])
      expect(run.code, `${sets.join(",")}: ${run.stdout}${run.stderr}`).toBe(0)
      expect(run.stdout).toContain("1 chart(s) linted, 0 chart(s) failed")
    }
  })

  it("with the defaults it renders exactly deploy/: no CRD (whereabouts' usually exist already, and are its manifests')", () => {
    const chart = helmTemplate(tool("helm"))
    expectSameObjects(chart, kustomized())
    expect(kind(chart, "CustomResourceDefinition")).toEqual([])
  })

  it("with crds.whereabouts it renders deploy/ with the whereabouts-crds component; every CRD it installs is kept on uninstall", () => {
    const chart = helmTemplate(tool("helm"), ["crds.whereabouts=true"])
    expectSameObjects(chart, kustomizeWith(tool("kubectl"), ["whereabouts-crds"]))
    expect(kind(chart, "CustomResourceDefinition")).toHaveLength(3)
    for (const sets of [["crds.whereabouts=true"], ["crds.networkAttachmentDefinition=true"], ["crds.whereabouts=true", "annotations.team=net"]]) {
      const crds = kind(helmTemplate(tool("helm"), sets), "CustomResourceDefinition")
      expect(crds.length, sets.join(",")).toBeGreaterThan(0)
      for (const crd of crds) expect(crd["metadata"]["annotations"]?.["helm.sh/resource-policy"], `${sets.join(",")}: ${idOf(crd)}`).toBe("keep")
    }
  })

  it("with everything on it renders deploy/ with the whereabouts-crds, nad-crd and monitoring components", () => {
    expectSameObjects(helmTemplate(tool("helm"), ALL_ON), kustomizeWith(tool("kubectl"), ["whereabouts-crds", "nad-crd", "monitoring"]))
  })

  it(`under the documented release name (${RELEASE}) names every object of its own whereabouts-gc…, none whereabouts-controller (upstream's node-slice controller Deployment)`, () => {
    const ours = helmTemplate(tool("helm"), ALL_ON).filter((o) => o["kind"] !== "CustomResourceDefinition")
    expect(ours.length).toBeGreaterThan(8)
    expect(ours.map(idOf).filter((id) => !/\/whereabouts-gc(-metrics|-dashboard)?$/.test(id))).toEqual([])
  })

  it("its CRDs, rules and dashboard are deploy/'s own files (symbolic links), not copies", () => {
    const links: ReadonlyArray<readonly [string, string]> = [
      ["files/crds/whereabouts.cni.cncf.io_ippools.yaml", "components/whereabouts-crds/whereabouts.cni.cncf.io_ippools.yaml"],
      ["files/crds/whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml", "components/whereabouts-crds/whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml"],
      ["files/crds/whereabouts.cni.cncf.io_nodeslicepools.yaml", "components/whereabouts-crds/whereabouts.cni.cncf.io_nodeslicepools.yaml"],
      ["files/crds/network-attachment-definitions.yaml", "components/nad-crd/network-attachment-definitions.yaml"],
      ["files/prometheusrule.yaml", "components/monitoring/prometheusrule.yaml"],
      ["files/dashboard.json", "components/monitoring/dashboard.json"]
    ]
    for (const [file, target] of links) {
      expect(lstatSync(join(CHART, file)).isSymbolicLink(), file).toBe(true)
      expect(realpathSync(join(CHART, file)), file).toBe(realpathSync(join(DEPLOY, target)))
    }
  })

  it("installs the image of its appVersion, which is the package's version", () => {
    const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version
    expect((parse(readFileSync(join(CHART, "Chart.yaml"), "utf8")) as Obj)["appVersion"]).toBe(version)
    expect(containerOf(helmTemplate(tool("helm")))["image"]).toBe(`ghcr.io/whereabouts-controller/whereabouts-controller:${version}`)
  })

  describe("RBAC", () => {
    it("is deploy/'s, row by row", () => {
      expect(rbacRows(helmTemplate(tool("helm")))).toEqual(EXPECTED_RBAC)
    })

    it("names the configured Lease and schedule ConfigMap, in the pools' namespace and the Lease's (the pod's)", () => {
      const chart = helmTemplate(tool("helm"), ["config.namespace=pools", "config.leaseName=wac-lease", "config.reconcileScheduleConfigmap=sweep-schedule"])
      const expected = EXPECTED_RBAC.map((row) =>
        row
          .replace("Role kube-system/", row.includes("coordination.k8s.io/leases") ? "Role kube-system/" : "Role pools/")
          .replace("[whereabouts-config]", "[sweep-schedule]")
          .replace("leases[whereabouts-gc]", "leases[wac-lease]")
      ).toSorted()
      expect(rbacRows(chart)).toEqual(expected)
      for (const b of kind(chart, "RoleBinding")) {
        expect(["pools", "kube-system"]).toContain(b["metadata"]["namespace"])
        expect(b["subjects"]).toEqual([{ kind: "ServiceAccount", name: "whereabouts-gc", namespace: "kube-system" }])
        expect(b["roleRef"]).toEqual({ apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "whereabouts-gc" })
      }
      expect(kind(chart, "RoleBinding")).toHaveLength(2)
    })

    it("grants nothing on ConfigMaps when the schedule ConfigMap is not looked at, nothing on Leases without leader election", () => {
      const noConfigMap = rbacRows(helmTemplate(tool("helm"), ["config.reconcileScheduleConfigmap="]))
      expect(noConfigMap).toEqual(EXPECTED_RBAC.filter((r) => !r.includes("core/configmaps")))
      const noElection = helmTemplate(tool("helm"), ["config.leaderElect=false", "replicas=1"])
      expect(rbacRows(noElection)).toEqual(EXPECTED_RBAC.filter((r) => !r.includes("coordination.k8s.io/leases")))
      expect(envOf(noElection)["LEADER_ELECT"]).toBe("false")
    })

    it("under another release name every object and reference carries that name; the Lease keeps the controller's default", () => {
      const chart = helmTemplate(tool("helm"), [], { release: "wac" })
      for (const o of chart) expect(o["metadata"]["name"], idOf(o)).toMatch(/^wac-whereabouts-gc(-metrics)?$/)
      expect(theOne(chart, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]).toBe("wac-whereabouts-gc")
      for (const b of [...kind(chart, "RoleBinding"), ...kind(chart, "ClusterRoleBinding")]) {
        expect(b["subjects"][0]["name"]).toBe("wac-whereabouts-gc")
        expect(b["roleRef"]["name"]).toBe("wac-whereabouts-gc")
      }
      expect(rbacRows(chart)).toEqual(EXPECTED_RBAC.map((r) => r.replace(/(Role (kube-system\/)?)whereabouts-gc /, "$1wac-whereabouts-gc ")).toSorted())
    })
  })

  describe("the controller's options", () => {
    it("values.yaml has one documented key per option of `run` (its flag and variable in the comment), the schema types it", () => {
      const doc = parseDocument(readFileSync(join(CHART, "values.yaml"), "utf8"))
      const config = doc.get("config", true)
      if (!isMap(config)) throw new Error("values.yaml has no config map")
      // The comment above the first key belongs to the map itself in the yaml library's model.
      const commentOf = (p: (typeof config.items)[number], i: number) => (p.key as { commentBefore?: string }).commentBefore ?? (i === 0 ? config.commentBefore : undefined) ?? ""
      const documented = new Map(config.items.map((p, i) => [isScalar(p.key) ? String(p.key.value) : "", commentOf(p, i)]))
      expect([...documented.keys()]).toEqual(RUN_OPTIONS.map((o) => camel(o.flag)))
      for (const o of RUN_OPTIONS) {
        const comment = documented.get(camel(o.flag))!
        expect(comment, camel(o.flag)).toContain(`--${o.flag} / ${o.env} (default`)
      }
      const schema = JSON.parse(readFileSync(join(CHART, "values.schema.json"), "utf8")) as Obj
      const properties = schema["properties"]["config"]["properties"] as Record<string, Obj>
      expect(Object.keys(properties)).toEqual(RUN_OPTIONS.map((o) => camel(o.flag)))
      for (const o of RUN_OPTIONS.filter((r) => r.kind === "boolean")) expect(properties[camel(o.flag)]!["type"], o.flag).toEqual(["boolean", "null"])
      expect(Object.keys(SAMPLE).toSorted(), "the sample below has a value for every option").toEqual(RUN_OPTIONS.map((o) => o.flag).toSorted())
    })

    it("every option set in values reaches the container as its variable, and the controller's Config decodes each one", () => {
      const chart = renderValues({ replicas: 1, config: sampleConfig() })
      const env = envOf(chart)
      for (const o of RUN_OPTIONS) expect(env[o.env], o.env).toBe(String(SAMPLE[o.flag]))
      const deployment = theOne(chart, "Deployment")
      const decoded = decodeConfig(resolveEnv(deployment, containerOf(chart), "whereabouts-gc-abc"))
      const defaults = decodeConfig(resolveEnv(deployment, containerOf(helmTemplate(tool("helm"))), "whereabouts-gc-abc"))
      // Every option's field moved off its default: each option got through (the tuning is fixed;
      // the identity and the Lease's namespace are the pod's, from the downward API).
      const options = Object.keys(defaults).filter((k) => k !== "identity" && k !== "leaseNamespace" && !(k in TUNING))
      const unchanged = options.filter((k) => JSON.stringify((decoded as Obj)[k]) === JSON.stringify((defaults as Obj)[k]))
      expect(unchanged).toEqual([])
      expect(decoded).toMatchObject({ namespace: "pools", concurrentBatches: 8, apiQps: 12.5, leaseName: "wac-lease", leaseNamespace: "kube-system", metricsPort: 9090, healthPort: 9091, poolUsageThreshold: 0.75 })
      const ports = Object.fromEntries((containerOf(chart)["ports"] as Array<Obj>).map((p) => [p["name"], p["containerPort"]]))
      expect(ports).toEqual({ metrics: 9090, health: 9091 })
      expect(theOne(chart, "Service")["spec"]["ports"]).toEqual([{ name: "metrics", port: 9090, targetPort: "metrics", protocol: "TCP" }])
    })

    it("without values only the namespace and leader election are set, as in deploy/", () => {
      expect(envOf(helmTemplate(tool("helm")))).toEqual({ WHEREABOUTS_NAMESPACE: "kube-system", LEADER_ELECT: "true" })
    })

    it("durations in Go's syntax reach the container as written, a bare 0 as \"0\", and the controller decodes them", () => {
      const chart = renderValues({ replicas: 1, config: { terminatingGrace: 0, shutdownTimeout: "1m30s", invariantGrace: "90s" } })
      const env = envOf(chart)
      expect([env["TERMINATING_GRACE"], env["SHUTDOWN_TIMEOUT"], env["INVARIANT_GRACE"]]).toEqual(["0", "1m30s", "90s"])
      const decoded = decodeConfig(resolveEnv(theOne(chart, "Deployment"), containerOf(chart), "whereabouts-gc-abc"))
      expect([decoded.terminatingGrace, decoded.shutdownTimeout, decoded.invariantGrace].map((d) => Duration.toMillis(d))).toEqual([0, 90_000, 90_000])
    })

    it("a whole number is written as an integer, a decimal as itself", () => {
      const env = envOf(renderValues({ config: { concurrentBatches: 1000000, apiQps: 0.5 } }))
      expect(env["CONCURRENT_BATCHES"]).toBe("1000000")
      expect(env["API_QPS"]).toBe("0.5")
    })

    it("extraArgs follow `run`; extraEnv, extraVolumes and extraVolumeMounts are added to deploy/'s", () => {
      const chart = renderValues({
        extraArgs: ["--log-level", "debug"],
        extraEnv: [{ name: "NODE_OPTIONS", value: "--enable-source-maps" }],
        extraVolumes: [{ name: "flat", configMap: { name: "whereabouts-flat" } }],
        extraVolumeMounts: [{ name: "flat", mountPath: "/etc/whereabouts", readOnly: true }]
      })
      const c = containerOf(chart)
      expect(c["args"]).toEqual(["run", "--log-level", "debug"])
      expect(c["env"].at(-1)).toEqual({ name: "NODE_OPTIONS", value: "--enable-source-maps" })
      expect(c["volumeMounts"]).toEqual([{ name: "tmp", mountPath: "/tmp" }, { name: "flat", mountPath: "/etc/whereabouts", readOnly: true }])
      expect(theOne(chart, "Deployment")["spec"]["template"]["spec"]["volumes"].map((v: Obj) => v["name"])).toEqual(["tmp", "flat"])
    })
  })

  it("applies the image, replicas, resources, scheduling, extra labels and annotations, and the namespace", () => {
    const chart = renderValues({
      namespaceOverride: "ipam",
      image: { repository: "registry.example/wac", tag: "0.2.0", pullPolicy: "Always" },
      imagePullSecrets: [{ name: "registry" }],
      replicas: 3,
      resources: { requests: { cpu: "100m", memory: "300Mi" }, limits: { memory: "1Gi" } },
      nodeSelector: { "node-role.kubernetes.io/control-plane": "" },
      tolerations: [{ key: "node-role.kubernetes.io/control-plane", operator: "Exists", effect: "NoSchedule" }],
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64"] }] }] } } },
      priorityClassName: "system-cluster-critical",
      topologySpreadConstraints: [],
      terminationGracePeriodSeconds: 75,
      labels: { team: "network" },
      annotations: { "owner.example/contact": "netops" },
      podLabels: { "sidecar.istio.io/inject": "false" },
      podAnnotations: { "example/scrape": "true" }
    })
    for (const o of chart) {
      expect(o["metadata"]["labels"]["team"], idOf(o)).toBe("network")
      expect(o["metadata"]["annotations"]?.["owner.example/contact"], idOf(o)).toBe("netops")
      if (o["kind"] !== "ClusterRole" && o["kind"] !== "ClusterRoleBinding") expect(o["metadata"]["namespace"], idOf(o)).toBe("ipam")
    }
    const d = theOne(chart, "Deployment")
    const pod = d["spec"]["template"]
    expect(d["spec"]["replicas"]).toBe(3)
    expect(d["spec"]["selector"]["matchLabels"]).toEqual({ "app.kubernetes.io/name": "whereabouts-gc", "app.kubernetes.io/component": "controller" })
    expect(pod["metadata"]["labels"]).toEqual({ "app.kubernetes.io/name": "whereabouts-gc", "app.kubernetes.io/component": "controller", "sidecar.istio.io/inject": "false" })
    expect(pod["metadata"]["annotations"]).toEqual({ "example/scrape": "true" })
    expect(pod["spec"]).toMatchObject({
      imagePullSecrets: [{ name: "registry" }],
      nodeSelector: { "node-role.kubernetes.io/control-plane": "" },
      tolerations: [{ key: "node-role.kubernetes.io/control-plane", operator: "Exists", effect: "NoSchedule" }],
      priorityClassName: "system-cluster-critical",
      terminationGracePeriodSeconds: 75
    })
    expect(pod["spec"]["affinity"]["nodeAffinity"]).toBeDefined()
    expect(pod["spec"]["topologySpreadConstraints"]).toBeUndefined()
    expect(containerOf(chart)).toMatchObject({ image: "registry.example/wac:0.2.0", imagePullPolicy: "Always", resources: { requests: { cpu: "100m", memory: "300Mi" }, limits: { memory: "1Gi" } } })
    expect(envOf(chart)["WHEREABOUTS_NAMESPACE"]).toBe("ipam")
    for (const b of [...kind(chart, "RoleBinding"), ...kind(chart, "ClusterRoleBinding")]) expect(b["subjects"][0]["namespace"]).toBe("ipam")
  })

  it("renders no PodDisruptionBudget for one replica (minAvailable 1 would block every drain), none when turned off", () => {
    expect(kind(helmTemplate(tool("helm"), ["replicas=1"]), "PodDisruptionBudget")).toEqual([])
    expect(kind(helmTemplate(tool("helm"), ["podDisruptionBudget.enabled=false"]), "PodDisruptionBudget")).toEqual([])
    expect(kind(helmTemplate(tool("helm")), "PodDisruptionBudget")).toHaveLength(1)
  })

  it("metricsPort 0 drops the metrics port and Service", () => {
    const chart = helmTemplate(tool("helm"), ["config.metricsPort=0"])
    expect(kind(chart, "Service")).toEqual([])
    expect((containerOf(chart)["ports"] as Array<Obj>).map((p) => p["name"])).toEqual(["health"])
    expect(envOf(chart)["METRICS_PORT"]).toBe("0")
  })

  it("the monitoring values: ServiceMonitor labels and scrape settings, rule labels and runbook base, dashboard namespace, labels and annotations", () => {
    const chart = renderValues({
      serviceMonitor: { enabled: true, labels: { release: "kube-prometheus-stack" }, interval: "1m", scrapeTimeout: "20s", metricRelabelings: [{ action: "drop", regex: "nodejs_gc_.*", sourceLabels: ["__name__"] }] },
      prometheusRule: { enabled: true, labels: { release: "kube-prometheus-stack" }, runbookBaseUrl: "https://wiki.example/runbooks/wac/" },
      dashboard: { enabled: true, namespace: "monitoring", labels: { grafana_dashboard: "1" }, annotations: { grafana_folder: "Networking" } }
    })
    const sm = theOne(chart, "ServiceMonitor")
    expect(sm["metadata"]["labels"]["release"]).toBe("kube-prometheus-stack")
    expect(sm["spec"]["endpoints"]).toEqual([{ port: "metrics", path: "/metrics", scheme: "http", interval: "1m", scrapeTimeout: "20s", metricRelabelings: [{ action: "drop", regex: "nodejs_gc_.*", sourceLabels: ["__name__"] }] }])
    const rule = theOne(chart, "PrometheusRule")
    expect(rule["metadata"]["labels"]["release"]).toBe("kube-prometheus-stack")
    const urls = (rule["spec"]["groups"] as Array<Obj>).flatMap((g) => (g["rules"] as Array<Obj>).map((r) => `${r["alert"]} ${r["annotations"]["runbook_url"]}`))
    expect(urls.length).toBeGreaterThanOrEqual(6)
    for (const u of urls) expect(u).toBe(`${u.split(" ")[0]} https://wiki.example/runbooks/wac#${u.split(" ")[0]!.toLowerCase()}`)
    const cm = theOne(chart, "ConfigMap")
    expect(cm["metadata"]).toMatchObject({ name: "whereabouts-gc-dashboard", namespace: "monitoring", labels: { grafana_dashboard: "1" }, annotations: { grafana_folder: "Networking" } })
    expect(cm["data"]["whereabouts-controller.json"]).toBe(readFileSync(join(DEPLOY, "components/monitoring/dashboard.json"), "utf8"))
  })

  describe("bad values are refused, naming the value", () => {
    const refused = (sets: ReadonlyArray<string>) => {
      const run = helm(tool("helm"), ["template", RELEASE, CHART, ...sets.flatMap((s) => ["--set", s])])
      expect(run.code, sets.join(",")).not.toBe(0)
      return run.stderr
    }
    it("a misspelt or unknown option, an option of another command", () => {
      expect(refused(["config.wokers=4"])).toContain("at '/config': additional properties 'wokers' not allowed")
      expect(refused(["config.output=json"])).toContain("additional properties 'output' not allowed")
      // A removed option's key: what replaced it is in docs/options.md.
      expect(refused(["config.leaseDuration=30s"])).toContain("additional properties 'leaseDuration' not allowed")
      expect(refused(["config.leaseNamespace=leases"])).toContain("additional properties 'leaseNamespace' not allowed")
      expect(refused(["config.apiBurst=40"])).toContain("additional properties 'apiBurst' not allowed")
      expect(refused(["config.sweepOnStart=false"])).toContain("additional properties 'sweepOnStart' not allowed")
      expect(refused(["config.reconcileScheduleFile=/etc/sweep"])).toContain("additional properties 'reconcileScheduleFile' not allowed")
      expect(refused(["config.bindAddress=::"])).toContain("additional properties 'bindAddress' not allowed")
      expect(refused(["serviceMonitor.enable=true"])).toContain("additional properties 'enable' not allowed")
    })
    it("a duration, number or level the controller would refuse at start-up", () => {
      expect(refused(["config.terminatingGrace=1d"])).toContain("at '/config/terminatingGrace': '1d' does not match pattern '^(0|([0-9]+(\\\\.[0-9]+)?(h|m|s|ms|us|µs|ns))+|")
      expect(refused(["config.invariantGrace=-1s"])).toContain("at '/config/invariantGrace': '-1s' does not match pattern")
      expect(refused(["config.concurrentBatches=0"])).toContain("at '/config/concurrentBatches': minimum: got 0, want 1")
      expect(refused(["config.poolUsageThreshold=most"])).toContain("at '/config/poolUsageThreshold'")
      expect(refused(["config.logLevel=loud"])).toContain("at '/config/logLevel'")
    })
    it("settings the Deployment cannot run with", () => {
      expect(refused(["config.healthPort=0"])).toContain("config.healthPort 0 turns /healthz and /readyz off")
      expect(refused(["config.metricsPort=8081"])).toContain("config.metricsPort and config.healthPort are both 8081")
      expect(refused(["config.leaderElect=false"])).toContain("replicas 2 without config.leaderElect")
      expect(refused(["serviceMonitor.enabled=true", "config.metricsPort=0"])).toContain("serviceMonitor.enabled needs the metrics endpoint")
    })
  })
})
