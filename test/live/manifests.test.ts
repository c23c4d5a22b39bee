/**
 * deploy/ against a real API server: `kubectl kustomize deploy/` applied server-side — first as a
 * server dry run (schemas, RBAC escalation checks, admission), then for real, then again as a
 * no-op — and a Pod built from the Deployment's template admitted by a namespace that enforces
 * the `restricted` Pod Security Standard. kubectl is the envtest assets' (scripts/envtest-assets.sh).
 * test/deploy/manifests.test.ts checks the rendered objects offline; this file checks that a
 * kube-apiserver takes them.
 */
import { execFile, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, expect, it } from "vitest"
import { parseAllDocuments } from "yaml"
import { describeLive, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { ruleVerbs, shippedRbac } from "./support/rbac.ts"

const ROOT = fileURLToPath(new URL("../..", import.meta.url))
const DEPLOY = path.join(ROOT, "deploy")
const SA = "system:serviceaccount:kube-system:whereabouts-controller"

type Obj = Record<string, any>

/** kubectl of the envtest assets: KUBEBUILDER_ASSETS, else the script's cache (never a build here: globalSetup ran it). */
const findKubectl = (): string => {
  const fromEnv = process.env["KUBEBUILDER_ASSETS"]
  const dir =
    fromEnv !== undefined && fromEnv !== ""
      ? fromEnv
      : spawnSync("bash", [path.join(ROOT, "scripts/envtest-assets.sh")], { encoding: "utf8", env: { ...process.env, ENVTEST_ASSETS_NO_BUILD: "1" } }).stdout.trim()
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
    Service: "service"
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
    expect(objects.length).toBeGreaterThanOrEqual(10)
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
