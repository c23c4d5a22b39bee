/**
 * deploy/ against a real API server: `kubectl kustomize deploy/` applied server-side — first as a
 * server dry run (schemas, RBAC escalation checks, admission), then for real, then again as a
 * no-op — and a Pod built from the Deployment's template admitted by a namespace that enforces
 * the `restricted` Pod Security Standard. kubectl is the envtest assets' (scripts/envtest-assets.sh).
 * test/deploy/manifests.test.ts checks the rendered objects offline; this file checks that a
 * kube-apiserver takes them. The Helm chart, rendered with every object on, passes the same server
 * dry run, its ServiceMonitor and PrometheusRule against the Prometheus Operator's CRDs
 * (scripts/prometheus-operator-crds.sh generates them from the operator's API types).
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, expect, it } from "vitest"
import { parseAllDocuments } from "yaml"
import { CHART, DEPLOY, type Found, findGoAsset, helm, kustomizeWith, required } from "../deploy/support/tools.ts"
import { describeLive, envtestAssets, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { ruleVerbs, shippedRbac } from "./support/rbac.ts"

const SA = "system:serviceaccount:kube-system:whereabouts-gc"

type Obj = Record<string, any>

/** kubectl of the tier's envtest assets. */
const findKubectl = (): string => {
  const dir = envtestAssets()
  const kubectl = path.join(dir, "kubectl")
  if (!fs.existsSync(kubectl)) throw new Error(`no kubectl in the envtest assets (${dir}): scripts/envtest-assets.sh builds it`)
  return kubectl
}

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (kubectl: string, args: ReadonlyArray<string>, stdin?: string): Promise<Run> =>
  new Promise((resolve) => {
    const child = execFile(kubectl, [...args], { maxBuffer: 64 << 20, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err === null ? 0 : typeof err.code === "number" ? err.code : 1, stdout, stderr })
    )
    child.stdin?.end(stdin ?? "")
  })

const parseObjects = (text: string): Array<Obj> =>
  parseAllDocuments(text).flatMap((d) => {
    if (d.errors.length > 0) throw new Error(`unparsable YAML: ${d.errors[0]!.message}`)
    const o = d.toJS() as Obj | null
    return o === null ? [] : [o]
  })

const idOf = (o: Obj): string => `${o["kind"]}/${o["metadata"]?.["namespace"] ?? ""}/${o["metadata"]?.["name"]}`
/** kubectl's name for an object in apply output: `<resource>[.<group>]/<name>`. */
const appliedName = (o: Obj): string => {
  const group = String(o["apiVersion"]).includes("/") ? String(o["apiVersion"]).split("/")[0] : ""
  const plural: Record<string, string> = {
    CustomResourceDefinition: "customresourcedefinition",
    ServiceAccount: "serviceaccount",
    ClusterRole: "clusterrole",
    ClusterRoleBinding: "clusterrolebinding",
    Role: "role",
    RoleBinding: "rolebinding",
    Deployment: "deployment",
    PodDisruptionBudget: "poddisruptionbudget",
    Service: "service",
    ConfigMap: "configmap",
    ServiceMonitor: "servicemonitor",
    PrometheusRule: "prometheusrule"
  }
  const resource = plural[String(o["kind"])] ?? String(o["kind"]).toLowerCase()
  return `${resource}${group === "" || group === "v1" ? "" : `.${group}`}/${o["metadata"]["name"]}`
}

describeLive("deploy/ on a real API server (kubectl apply --server-side)", () => {
  // Looked up when a test runs (never while a skipped tier is collected).
  let kubectlPath: string | undefined
  const kubectl = () => (kubectlPath ??= findKubectl())
  const kubeconfig = () => runningEnvtest().kubeconfigPath
  const k = (args: ReadonlyArray<string>, stdin?: string) => run(kubectl(), ["--kubeconfig", kubeconfig(), ...args], stdin)
  let tmp = ""
  beforeAll(() => void (tmp = fs.mkdtempSync(path.join(os.tmpdir(), "wac-manifests-"))))
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

  let rendered = ""
  let objects: Array<Obj> = []
  const render = async () => {
    if (rendered !== "") return
    const out = await run(kubectl(), ["kustomize", DEPLOY])
    expect(out.code, out.stderr).toBe(0)
    rendered = out.stdout
    objects = parseObjects(rendered)
  }

  /** resourceVersion (and generation) of every rendered object, read back from the server. */
  const versions = async (): Promise<Record<string, string>> => {
    const out = await k(["get", "-f", "-", "-o", "json"], rendered)
    expect(out.code, out.stderr).toBe(0)
    const parsed = JSON.parse(out.stdout) as Obj
    const items: Array<Obj> = parsed["kind"] === "List" ? parsed["items"] : [parsed]
    return Object.fromEntries(items.map((o) => [idOf(o), `${o["metadata"]["resourceVersion"]}/${o["metadata"]["generation"] ?? "-"}`]))
  }

  it("every rendered object passes a server-side dry-run apply (schemas, RBAC escalation check, admission)", async () => {
    await render()
    // The controller's eight objects; whereabouts' CRDs are an opt-in component, not deploy/'s.
    expect(objects.length).toBeGreaterThanOrEqual(8)
    expect(objects.filter((o) => o["kind"] === "CustomResourceDefinition")).toEqual([])
    const out = await k(["apply", "--server-side", "--dry-run=server", "-f", "-"], rendered)
    expect(out.code, out.stderr).toBe(0)
    const lines = out.stdout.trim().split("\n").sort()
    expect(lines).toEqual(objects.map((o) => `${appliedName(o)} serverside-applied (server dry run)`).sort())
  }, 60_000)

  it("deploy/ composed with the nad-crd component also passes the server dry run", async () => {
    const dir = fs.mkdtempSync(path.join(tmp, "compose-"))
    fs.writeFileSync(
      path.join(dir, "kustomization.yaml"),
      [
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
        `resources: [${JSON.stringify(path.relative(dir, DEPLOY))}]`,
        `components: [${JSON.stringify(path.relative(dir, path.join(DEPLOY, "components/nad-crd")))}]`
      ].join("\n")
    )
    const composed = await run(kubectl(), ["kustomize", dir])
    expect(composed.code, composed.stderr).toBe(0)
    const out = await k(["apply", "--server-side", "--dry-run=server", "-f", "-"], composed.stdout)
    expect(out.code, out.stderr).toBe(0)
    expect(out.stdout).toContain("customresourcedefinition.apiextensions.k8s.io/network-attachment-definitions.k8s.cni.cncf.io serverside-applied (server dry run)")
  }, 60_000)

  it("a real server-side apply creates everything; applying again changes nothing", async () => {
    await render()
    const first = await k(["apply", "--server-side", "-f", "-"], rendered)
    expect(first.code, first.stderr).toBe(0)
    const before = await versions()
    expect(Object.keys(before).sort()).toEqual(objects.map(idOf).sort())
    const again = await k(["apply", "--server-side", "-f", "-"], rendered)
    expect(again.code, again.stderr).toBe(0)
    // kubectl prints "serverside-applied" either way: the server's resourceVersions tell a no-op.
    expect(await versions()).toEqual(before)
    // What the API server now holds is what was rendered (plus the server's defaults).
    const deployment = objects.find((o) => o["kind"] === "Deployment")!
    const live = await k(["get", "deployment", "-n", "kube-system", deployment["metadata"]["name"], "-o", "json"])
    expect(live.code, live.stderr).toBe(0)
    expect(JSON.parse(live.stdout) as Obj).toMatchObject({ metadata: deployment["metadata"], spec: deployment["spec"] })
  }, 60_000)

  it("the applied RBAC grants the ServiceAccount each rule verb of deploy/, and not the pool writes the CNI plugin owns", async () => {
    await render()
    const rbac = shippedRbac()
    const groupOf = (kind: "ClusterRole" | "Role", rule: number) => (kind === "ClusterRole" ? rbac.clusterRole : rbac.role).rules[rule]!
    const checks = ruleVerbs(rbac).map((v) => {
      const rule = groupOf(v.kind, v.rule)
      const group = rule.apiGroups[0] ?? ""
      const resource = `${v.resource}${group === "" ? "" : `.${group}`}${rule.resourceNames === undefined ? "" : `/${rule.resourceNames[0]}`}`
      return { args: [v.verb, resource, ...(v.kind === "Role" ? ["-n", "kube-system"] : ["--all-namespaces"])], want: "yes" }
    })
    const denied = [
      ["create", "ippools.whereabouts.cni.cncf.io", "-n", "kube-system"],
      ["update", "ippools.whereabouts.cni.cncf.io", "-n", "kube-system"],
      ["update", "overlappingrangeipreservations.whereabouts.cni.cncf.io", "-n", "kube-system"],
      ["delete", "pods", "--all-namespaces"],
      ["update", "leases.coordination.k8s.io/another-lease", "-n", "kube-system"],
      ["get", "secrets", "-n", "kube-system"]
    ].map((args) => ({ args, want: "no" }))
    const results = await Promise.all(
      [...checks, ...denied].map(async (c) => {
        const out = await k(["auth", "can-i", ...c.args, `--as=${SA}`])
        return `${c.args.join(" ")}: ${out.stdout.trim()}`
      })
    )
    expect(results).toEqual([...checks, ...denied].map((c) => `${c.args.join(" ")}: ${c.want}`))
  }, 60_000)

  it("a Pod built from the Deployment's template is admitted where `restricted` Pod Security is enforced (dry-run create)", async () => {
    await render()
    const ns = uniqueNamespace("psa-restricted")
    const created = await k(["create", "-f", "-"], JSON.stringify({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: ns, labels: { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest" } }
    }))
    expect(created.code, created.stderr).toBe(0)
    const template = objects.find((o) => o["kind"] === "Deployment")!["spec"]["template"]
    const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "from-template", namespace: ns, labels: template["metadata"]["labels"] }, spec: template["spec"] }
    const admitted = await k(["create", "--dry-run=server", "-o", "name", "-f", "-"], JSON.stringify(pod))
    expect(admitted.code, admitted.stderr).toBe(0)
    expect(admitted.stdout.trim()).toBe("pod/from-template")
    // The namespace really enforces it: the same Pod without its security contexts is refused.
    const container = template["spec"]["containers"][0]
    const { securityContext: _podSc, ...podSpec } = template["spec"]
    const { securityContext: _containerSc, ...bare } = container
    const loose = { ...pod, metadata: { ...pod.metadata, name: "loose" }, spec: { ...podSpec, containers: [bare] } }
    const refused = await k(["create", "--dry-run=server", "-o", "name", "-f", "-"], JSON.stringify(loose))
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain('violates PodSecurity "restricted:latest"')
  }, 60_000)
})

/** helm and the Prometheus Operator's CRDs, or why not; under WHEREABOUTS_ENVTEST=require a missing one fails the test. */
const chartTools = (): { readonly helm: string; readonly crds: string } | { readonly reason: string } => {
  const found: Record<"helm" | "crds", Found> = { helm: findGoAsset("helm.sh", "HELM"), crds: findGoAsset("prometheus-operator-crds.sh", "PROMETHEUS_OPERATOR_CRDS") }
  const reasons = Object.values(found).flatMap((f) => ("reason" in f ? [f.reason] : []))
  if (reasons.length === 0) return { helm: (found.helm as { path: string }).path, crds: (found.crds as { path: string }).path }
  if (required()) throw new Error(`WHEREABOUTS_ENVTEST=require but the chart's dry run cannot run: ${reasons.join("; ")}`)
  return { reason: reasons.join("; ") }
}

const MONITORING_CRDS = ["servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"]

describeLive("charts/whereabouts-controller on a real API server (helm template | kubectl apply --server-side --dry-run=server)", () => {
  let kubectlPath: string | undefined
  const kubectl = () => (kubectlPath ??= findKubectl())
  const k = (args: ReadonlyArray<string>, stdin?: string) => run(kubectl(), ["--kubeconfig", runningEnvtest().kubeconfigPath, ...args], stdin)
  let tools: ReturnType<typeof chartTools> | undefined
  let installed = false

  /** The tools, and the Prometheus Operator's CRDs installed for real (a dry run of a custom object needs its CRD served). */
  const ready = async (skip: (note: string) => void) => {
    tools ??= chartTools()
    if ("reason" in tools) return skip(tools.reason)
    if (!installed) {
      const applied = await k(["apply", "--server-side", "-f", tools.crds])
      expect(applied.code, applied.stderr).toBe(0)
      const established = await k(["wait", "--for=condition=Established", "--timeout=60s", ...MONITORING_CRDS.map((c) => `crd/${c}`)])
      expect(established.code, established.stderr).toBe(0)
      installed = true
    }
    return tools
  }
  afterAll(async () => {
    if (installed) await k(["delete", "--wait=false", "--ignore-not-found", ...MONITORING_CRDS.map((c) => `crd/${c}`)])
  })

  // A dry run over objects the tier already holds (the CRDs globalSetup installed, deploy/ applied
  // above) would conflict with their field managers on the labels helm sets differently: a release
  // name of its own keeps the chart's names apart, and --force-conflicts the shared CRDs.
  const dryRun = (text: string) => k(["apply", "--server-side", "--force-conflicts", "--field-manager=chart-dry-run", "--dry-run=server", "-f", "-"], text)

  it("the chart with every object on passes the server dry run, ServiceMonitor and PrometheusRule included", async (ctx) => {
    const t = await ready((note) => ctx.skip(note))
    if (t === undefined) return
    const sets = ["crds.whereabouts=true", "crds.networkAttachmentDefinition=true", "serviceMonitor.enabled=true", "prometheusRule.enabled=true", "dashboard.enabled=true"]
    const rendered = helm(t.helm, ["template", "wac-chart", CHART, "--namespace", "kube-system", ...sets.flatMap((x) => ["--set", x])])
    expect(rendered.code, rendered.stderr).toBe(0)
    const objects = parseObjects(rendered.stdout)
    expect(objects.map((o) => o["kind"])).toEqual(expect.arrayContaining(["ServiceMonitor", "PrometheusRule", "ConfigMap", "Deployment", "Role", "ClusterRole"]))
    const out = await dryRun(rendered.stdout)
    expect(out.code, out.stderr).toBe(0)
    expect(out.stdout.trim().split("\n").sort()).toEqual(objects.map((o) => `${appliedName(o)} serverside-applied (server dry run)`).sort())
  }, 120_000)

  it("deploy/ with the monitoring component passes it too", async (ctx) => {
    if ((await ready((note) => ctx.skip(note))) === undefined) return
    const composed = kustomizeWith(kubectl(), ["monitoring"])
    const text = composed.map((o) => JSON.stringify(o)).join("\n---\n")
    const out = await dryRun(text)
    expect(out.code, out.stderr).toBe(0)
    for (const kind of ["servicemonitor", "prometheusrule"]) expect(out.stdout).toContain(`${kind}.monitoring.coreos.com/whereabouts-gc serverside-applied (server dry run)`)
  }, 60_000)

  it("the Prometheus Operator's schemas do validate: a scrape interval or a `for` that is no Prometheus duration is refused", async (ctx) => {
    const t = await ready((note) => ctx.skip(note))
    if (t === undefined) return
    const monitor = { apiVersion: "monitoring.coreos.com/v1", kind: "ServiceMonitor", metadata: { name: "bad-interval", namespace: "kube-system" }, spec: { selector: {}, endpoints: [{ port: "metrics", interval: "30 seconds" }] } }
    const refusedMonitor = await k(["create", "--dry-run=server", "-f", "-"], JSON.stringify(monitor))
    expect(refusedMonitor.code).not.toBe(0)
    expect(refusedMonitor.stderr).toContain("spec.endpoints[0].interval")
    const rule = { apiVersion: "monitoring.coreos.com/v1", kind: "PrometheusRule", metadata: { name: "bad-for", namespace: "kube-system" }, spec: { groups: [{ name: "g", rules: [{ alert: "A", expr: "vector(1)", for: "a while" }] }] } }
    const refusedRule = await k(["create", "--dry-run=server", "-f", "-"], JSON.stringify(rule))
    expect(refusedRule.code).not.toBe(0)
    expect(refusedRule.stderr).toContain("spec.groups[0].rules[0].for")
  }, 60_000)
})
