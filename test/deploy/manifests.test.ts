/**
 * deploy/ as kustomize renders it (`kubectl kustomize`, kubectl from the envtest assets): the
 * restricted security context, probes, replicas, least-privilege RBAC pinned verb by verb, and
 * a Deployment whose environment the controller's own Config definition actually reads.
 * Server-side validation (dry-run apply against a real API server) belongs to the live tier.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { accessSync, constants, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { ConfigProvider, Duration, Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { parseAllDocuments } from "yaml"
import { config } from "../../src/services/ControllerConfig.ts"
import * as R from "../../src/services/resources.ts"
import { TEARDOWN_MARGIN } from "../../src/programs/shutdown.ts"

const ROOT = fileURLToPath(new URL("../..", import.meta.url))
const DEPLOY = join(ROOT, "deploy")
const NAMESPACE = "kube-system"
const IMAGE = "ghcr.io/whereabouts-controller/whereabouts-controller"

// --- kubectl from the envtest assets -------------------------------------------------------

const executable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** kubectl from KUBEBUILDER_ASSETS, else from the script's cache (built only when required). */
const findKubectl = (): { readonly kubectl: string } | { readonly reason: string } => {
  const assets = process.env["KUBEBUILDER_ASSETS"]
  if (assets !== undefined && assets !== "") {
    const kubectl = join(assets, "kubectl")
    return executable(kubectl) ? { kubectl } : { reason: `KUBEBUILDER_ASSETS=${assets} has no kubectl` }
  }
  const required = process.env["WHEREABOUTS_ENVTEST"] === "require"
  const run = spawnSync("bash", [join(ROOT, "scripts/envtest-assets.sh")], {
    encoding: "utf8",
    env: required ? process.env : { ...process.env, ENVTEST_ASSETS_NO_BUILD: "1" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const dir = run.stdout.trim()
  if (run.status !== 0 || dir === "") {
    return { reason: "no envtest assets yet (run scripts/envtest-assets.sh once, or set KUBEBUILDER_ASSETS)" }
  }
  const kubectl = join(dir, "kubectl")
  return executable(kubectl) ? { kubectl } : { reason: `${dir} has no kubectl` }
}

const found = findKubectl()
if ("reason" in found) {
  if (process.env["WHEREABOUTS_ENVTEST"] === "require") throw new Error(`WHEREABOUTS_ENVTEST=require but kubectl is unavailable: ${found.reason}`)
  console.warn(`test/deploy/manifests.test.ts skipped: ${found.reason}`)
}

// --- rendered objects ----------------------------------------------------------------------

// Rendered manifests, read loosely: the assertions themselves check the shape.
type Obj = Record<string, any>

const kustomize = (kubectl: string, dir: string): Array<Obj> => {
  const out = execFileSync(kubectl, ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  const docs = parseAllDocuments(out)
  for (const d of docs) if (d.errors.length > 0) throw new Error(`unparsable kustomize output: ${d.errors[0]!.message}`)
  return docs.map((d) => d.toJS() as Obj).filter((o) => o !== null)
}

const idOf = (o: Obj): string => `${o["kind"]}/${o["metadata"]?.["namespace"] ?? ""}/${o["metadata"]?.["name"]}`
const one = (objects: ReadonlyArray<Obj>, kind: string): Obj => {
  const all = objects.filter((o) => o["kind"] === kind)
  expect(all, `exactly one ${kind}`).toHaveLength(1)
  return all[0]!
}

// --- the Config keys the controller reads, learnt by running its Config definition ---------

/** Runs `config` over exactly `env`, recording every key it looks up. */
const loadConfig = (env: ReadonlyMap<string, string>) => {
  const read = new Set<string>()
  const inner = ConfigProvider.fromMap(new Map(env)).flattened
  const recording = ConfigProvider.fromFlat(
    ConfigProvider.makeFlat({
      load: (path, primitive, split) => {
        read.add(path.join("."))
        return inner.load(path, primitive, split)
      },
      enumerateChildren: (path) => inner.enumerateChildren(path),
      patch: inner.patch
    })
  )
  const result = Effect.runSync(Effect.either(Effect.withConfigProvider(config, recording)))
  return { read, result }
}

/** The container's environment as the kubelet would fill it in (downward API resolved). */
const resolveEnv = (pod: Obj, container: Obj, podName: string): Map<string, string> => {
  const fields: Record<string, string> = { "metadata.name": podName, "metadata.namespace": pod["metadata"]["namespace"] }
  const env = new Map<string, string>()
  for (const e of container["env"] ?? []) {
    if (typeof e["value"] === "string") env.set(e["name"], e["value"])
    else {
      const path = e["valueFrom"]?.["fieldRef"]?.["fieldPath"]
      const value = typeof path === "string" ? fields[path] : undefined
      if (value === undefined) throw new Error(`env ${e["name"]}: only literal values and metadata.name/namespace fieldRefs are modelled here`)
      env.set(e["name"], value)
    }
  }
  return env
}

// --- RBAC, pinned ----------------------------------------------------------------------------

/** Every grant, one row per (role, apiGroup, resource, resourceNames); verbs sorted. Change only on purpose. */
const EXPECTED_RBAC: ReadonlyArray<string> = [
  // ClusterRole: cluster-wide reads of pods and NADs, Events next to the pods.
  "ClusterRole whereabouts-controller | core/pods | get,list,watch",
  "ClusterRole whereabouts-controller | core/nodes | get,list,watch",
  "ClusterRole whereabouts-controller | k8s.cni.cncf.io/network-attachment-definitions | list,watch",
  "ClusterRole whereabouts-controller | core/events | create,patch",
  // Role in kube-system: the pools, their reservations and the leader Lease.
  "Role kube-system/whereabouts-controller | whereabouts.cni.cncf.io/ippools | delete,get,list,patch,watch",
  "Role kube-system/whereabouts-controller | whereabouts.cni.cncf.io/nodeslicepools | list,watch",
  "Role kube-system/whereabouts-controller | whereabouts.cni.cncf.io/overlappingrangeipreservations | create,delete,get,list,watch",
  "Role kube-system/whereabouts-controller | core/configmaps[whereabouts-config] | list,watch",
  "Role kube-system/whereabouts-controller | coordination.k8s.io/leases | create",
  "Role kube-system/whereabouts-controller | coordination.k8s.io/leases[whereabouts-controller] | get,update"
].toSorted()

const rbacRows = (objects: ReadonlyArray<Obj>): Array<string> =>
  objects
    .filter((o) => o["kind"] === "ClusterRole" || o["kind"] === "Role")
    .flatMap((role) => {
      const who = `${role["kind"]} ${role["kind"] === "Role" ? `${role["metadata"]["namespace"]}/` : ""}${role["metadata"]["name"]}`
      return (role["rules"] ?? []).flatMap((rule: Obj) =>
        (rule["apiGroups"] as Array<string>).flatMap((g) =>
          (rule["resources"] as Array<string>).map((res) => {
            const names = rule["resourceNames"] === undefined ? "" : `[${(rule["resourceNames"] as Array<string>).toSorted().join(",")}]`
            return `${who} | ${g === "" ? "core" : g}/${res}${names} | ${(rule["verbs"] as Array<string>).toSorted().join(",")}`
          })
        )
      )
    })
    .toSorted()

/**
 * API calls on a known resource in the deployed code (src/testing, the simulation, is not deployed), as `group/plural verb` (PUT is RBAC's
 * `update`; an informer is `list` + `watch`). A static scan: it sees the calls written as
 * `api.<verb>(R.X | X, ...)`, `listAll(R.X, ...)` and informers' `resource: R.X`.
 */
const callsInCode = (): Map<string, Set<string>> => {
  const byName = new Map<string, R.Resource>()
  for (const [name, v] of Object.entries(R)) if (typeof v === "object" && v !== null && "plural" in v) byName.set(name, v as R.Resource)
  const key = (r: R.Resource) => `${r.group === "" ? "core" : r.group}/${r.plural}`
  const calls = new Map<string, Set<string>>()
  const add = (file: string, res: string, verb: string) => {
    const r = byName.get(res)
    if (r === undefined) return
    const k = `${key(r)} ${verb}`
    if (!calls.has(k)) calls.set(k, new Set())
    calls.get(k)!.add(file)
  }
  for (const dir of ["src/services", "src/programs"]) {
    for (const f of readdirSync(join(ROOT, dir)).filter((n) => n.endsWith(".ts"))) {
      const file = `${dir}/${f}`
      const src = readFileSync(join(ROOT, file), "utf8")
      for (const m of src.matchAll(/\bapi\s*\.\s*(get|list|watch|create|replace|patch|delete)\s*\(\s*(?:R\.)?([A-Z]\w*)/g)) {
        add(file, m[2]!, m[1] === "replace" ? "update" : m[1]!)
      }
      for (const m of src.matchAll(/\blistAll\s*\(\s*(?:R\.)?([A-Z]\w*)/g)) add(file, m[1]!, "list")
      for (const m of src.matchAll(/\bresource:\s*(?:R\.)?([A-Z]\w*)/g)) {
        add(file, m[1]!, "list")
        add(file, m[1]!, "watch")
      }
    }
  }
  return calls
}

/** Deployed programs that may create reservations: only to restore one a reborn pod took back. */
const RESTORES_RESERVATIONS: ReadonlySet<string> = new Set(["src/programs/executor.ts"])

// --- the tests ---------------------------------------------------------------------------------

const suite = "kubectl" in found ? describe : describe.skip
const title = "kubectl" in found ? "deploy/ (kubectl kustomize)" : `deploy/ (kubectl kustomize) — skipped: ${found.reason}`

suite(title, () => {
  const kubectl = "kubectl" in found ? found.kubectl : ""
  const objects = "kubectl" in found ? kustomize(kubectl, DEPLOY) : []
  const deployment = () => one(objects, "Deployment")
  const podSpec = () => deployment()["spec"]["template"]["spec"] as Obj
  const containers = () => [...(podSpec()["initContainers"] ?? []), ...podSpec()["containers"]] as Array<Obj>

  it("renders exactly the controller's objects, namespaced ones in kube-system, no NAD CRD by default", () => {
    expect(objects.map(idOf).toSorted()).toEqual(
      [
        "CustomResourceDefinition//ippools.whereabouts.cni.cncf.io",
        "CustomResourceDefinition//overlappingrangeipreservations.whereabouts.cni.cncf.io",
        "CustomResourceDefinition//nodeslicepools.whereabouts.cni.cncf.io",
        `ServiceAccount/${NAMESPACE}/whereabouts-controller`,
        "ClusterRole//whereabouts-controller",
        "ClusterRoleBinding//whereabouts-controller",
        `Role/${NAMESPACE}/whereabouts-controller`,
        `RoleBinding/${NAMESPACE}/whereabouts-controller`,
        `Deployment/${NAMESPACE}/whereabouts-controller`,
        `PodDisruptionBudget/${NAMESPACE}/whereabouts-controller`,
        `Service/${NAMESPACE}/whereabouts-controller-metrics`
      ].toSorted()
    )
  })

  it("the nad-crd component composes with deploy/ and adds only the NetworkAttachmentDefinition CRD", () => {
    // An overlay inside deploy/ cannot include ../../ (kustomize: cycle), so compose from outside.
    const dir = mkdtempSync(join(tmpdir(), "wac-kustomize-"))
    try {
      writeFileSync(
        join(dir, "kustomization.yaml"),
        [
          "apiVersion: kustomize.config.k8s.io/v1beta1",
          "kind: Kustomization",
          `resources: [${JSON.stringify(relative(dir, DEPLOY))}]`,
          `components: [${JSON.stringify(relative(dir, join(DEPLOY, "components/nad-crd")))}]`
        ].join("\n")
      )
      const withNad = kustomize(kubectl, dir)
      const added = withNad.filter((o) => !objects.some((b) => idOf(b) === idOf(o)))
      expect(added.map(idOf)).toEqual(["CustomResourceDefinition//network-attachment-definitions.k8s.cni.cncf.io"])
      expect(added[0]!["spec"]["names"]["plural"]).toBe(R.NetworkAttachmentDefinitions.plural)
      expect(withNad).toHaveLength(objects.length + 1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("the CRDs serve the group, version and plurals the controller uses", () => {
    const crds = objects.filter((o) => o["kind"] === "CustomResourceDefinition")
    for (const r of [R.IPPools, R.OverlappingRangeIPReservations]) {
      const crd = crds.find((c) => c["spec"]["names"]["plural"] === r.plural)
      expect(crd, r.plural).toBeDefined()
      expect(crd!["spec"]["group"]).toBe(r.group)
      expect(crd!["spec"]["scope"]).toBe("Namespaced")
      expect(crd!["spec"]["versions"].some((v: Obj) => v["name"] === r.version && v["served"] === true)).toBe(true)
    }
  })

  it("runs 2 replicas of the image whose tag is the package version, with `run`", () => {
    const d = deployment()
    const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version
    expect(d["spec"]["replicas"]).toBe(2)
    expect(d["spec"]["template"]["spec"]["containers"]).toHaveLength(1)
    const [c] = d["spec"]["template"]["spec"]["containers"]
    expect(c["image"]).toBe(`${IMAGE}:${version}`)
    expect(c["args"]).toEqual(["run"])
    expect(podSpec()["serviceAccountName"]).toBe(one(objects, "ServiceAccount")["metadata"]["name"])
  })

  it("every container runs with the restricted security context; nothing reaches the host", () => {
    const pod = podSpec()
    const podSc = pod["securityContext"] ?? {}
    expect(pod["hostNetwork"] ?? false).toBe(false)
    expect(pod["hostPID"] ?? false).toBe(false)
    expect(pod["hostIPC"] ?? false).toBe(false)
    for (const v of pod["volumes"] ?? []) expect(Object.keys(v).filter((k) => k !== "name"), `volume ${v["name"]}`).toEqual(["emptyDir"])
    expect(containers().length).toBeGreaterThan(0)
    for (const c of containers()) {
      const sc = c["securityContext"] ?? {}
      const name = `container ${c["name"]}`
      expect(sc["allowPrivilegeEscalation"], name).toBe(false)
      expect(sc["readOnlyRootFilesystem"], name).toBe(true)
      expect(sc["privileged"] ?? false, name).toBe(false)
      expect(sc["runAsNonRoot"] ?? podSc["runAsNonRoot"], name).toBe(true)
      expect(sc["runAsUser"] ?? podSc["runAsUser"], name).toBe(65532)
      expect(sc["capabilities"]?.["drop"], name).toEqual(["ALL"])
      expect(sc["capabilities"]?.["add"] ?? [], name).toEqual([])
      expect((sc["seccompProfile"] ?? podSc["seccompProfile"])?.["type"], name).toBe("RuntimeDefault")
      for (const p of c["ports"] ?? []) expect(p["hostPort"], `${name} port ${p["name"]}`).toBeUndefined()
    }
  })

  it("probes /healthz and /readyz on the health port, serves metrics on 8080, and sets requests and a memory limit", () => {
    const [c] = podSpec()["containers"]
    const ports = new Map((c["ports"] as Array<Obj>).map((p) => [p["name"], p["containerPort"]]))
    expect(Object.fromEntries(ports)).toEqual({ health: 8081, metrics: 8080 })
    expect(c["livenessProbe"]["httpGet"]).toEqual({ path: "/healthz", port: "health" })
    expect(c["readinessProbe"]["httpGet"]).toEqual({ path: "/readyz", port: "health" })
    expect(c["resources"]["requests"]["cpu"]).toBeDefined()
    expect(c["resources"]["requests"]["memory"]).toBeDefined()
    expect(c["resources"]["limits"]["memory"]).toBeDefined()
    expect(one(objects, "Service")["spec"]["ports"]).toEqual([{ name: "metrics", port: 8080, targetPort: "metrics", protocol: "TCP" }])
  })

  it("the Deployment's environment is read by ControllerConfig and decodes to what the manifests assume", () => {
    const d = deployment()
    const [c] = podSpec()["containers"]
    const env = resolveEnv(d, c, "whereabouts-controller-7d9f8-abcde")
    const { read, result } = loadConfig(env)
    // Sanity: the recording saw the keys the config is known to have.
    expect(read).toContain("WHEREABOUTS_NAMESPACE")
    expect(read).toContain("SHUTDOWN_TIMEOUT")
    expect([...env.keys()].filter((k) => !read.has(k)), "env vars ControllerConfig does not read").toEqual([])
    if (Either.isLeft(result)) throw new Error(`the Deployment's env does not decode: ${String(result.left)}`)
    const cfg = result.right
    expect(cfg.namespace).toBe(NAMESPACE)
    expect(cfg.leaderElect).toBe(true)
    expect(cfg.identity).toBe("whereabouts-controller-7d9f8-abcde")
    expect(cfg.leaseNamespace).toBe(d["metadata"]["namespace"])
    // Every address: the kubelet probes the pod IP, which is IPv6 in an IPv6-only cluster.
    expect(cfg.bindAddress).toBe("")
    const ports = new Map((c["ports"] as Array<Obj>).map((p) => [p["name"], p["containerPort"]]))
    expect(cfg.healthPort).toBe(ports.get("health"))
    expect(cfg.metricsPort).toBe(ports.get("metrics"))
    // SIGTERM → drain for at most SHUTDOWN_TIMEOUT → release the lease within RENEW_DEADLINE →
    // the rest, or the controller's own exit at its deadline: the kubelet must wait longer.
    const ownDeadline = Duration.sum(Duration.sum(cfg.shutdownTimeout, cfg.renewDeadline), TEARDOWN_MARGIN)
    expect(podSpec()["terminationGracePeriodSeconds"]).toBeGreaterThan(Duration.toSeconds(ownDeadline))
    // The Role grants get/update on the Lease by name: it must be the one the controller uses.
    const role = one(objects, "Role")
    const named = (role["rules"] as Array<Obj>).filter((r) => r["resources"].includes("leases") && r["resourceNames"] !== undefined)
    expect(named.flatMap((r) => r["resourceNames"])).toEqual([cfg.leaseName])
    expect(role["metadata"]["namespace"]).toBe(cfg.leaseNamespace)
    expect(role["metadata"]["namespace"]).toBe(cfg.namespace)
  })

  it("selectors of the Deployment, PodDisruptionBudget and Service match the pods; the PDB keeps one", () => {
    const labels = deployment()["spec"]["template"]["metadata"]["labels"] as Record<string, string>
    const matches = (sel: Record<string, string>) => Object.entries(sel).every(([k, v]) => labels[k] === v)
    expect(matches(deployment()["spec"]["selector"]["matchLabels"])).toBe(true)
    const pdb = one(objects, "PodDisruptionBudget")
    expect(matches(pdb["spec"]["selector"]["matchLabels"])).toBe(true)
    expect(pdb["spec"]["minAvailable"]).toBe(1)
    expect(matches(one(objects, "Service")["spec"]["selector"])).toBe(true)
  })

  it("RBAC grants exactly the pinned verbs, no wildcard, to the controller's ServiceAccount only", () => {
    expect(rbacRows(objects)).toEqual(EXPECTED_RBAC)
    for (const role of objects.filter((o) => o["kind"] === "ClusterRole" || o["kind"] === "Role")) {
      expect(role["aggregationRule"], idOf(role)).toBeUndefined()
      for (const rule of role["rules"] as Array<Obj>) {
        expect(rule["nonResourceURLs"], idOf(role)).toBeUndefined()
        for (const field of ["apiGroups", "resources", "verbs", "resourceNames"]) {
          for (const v of rule[field] ?? []) expect(v, `${idOf(role)} ${field}`).not.toContain("*")
        }
      }
    }
    const sa = one(objects, "ServiceAccount")
    for (const kind of ["ClusterRoleBinding", "RoleBinding"] as const) {
      const b = one(objects, kind)
      expect(b["subjects"], kind).toEqual([{ kind: "ServiceAccount", name: sa["metadata"]["name"], namespace: sa["metadata"]["namespace"] }])
      const role = one(objects, kind === "RoleBinding" ? "Role" : "ClusterRole")
      expect(b["roleRef"]).toEqual({ apiGroup: "rbac.authorization.k8s.io", kind: role["kind"], name: role["metadata"]["name"] })
    }
  })

  it("RBAC covers every API call of the deployed code (static scan), and grants nothing it does not make", () => {
    const calls = callsInCode()
    // The scan must see the controller's calls at all, or it proves nothing.
    expect(calls.size).toBeGreaterThanOrEqual(10)
    const granted = new Set(
      rbacRows(objects).flatMap((row) => {
        const [, res, verbs] = row.split(" | ")
        return verbs!.split(",").map((v) => `${res!.replace(/\[.*\]$/, "")} ${v}`)
      })
    )
    const missing = [...calls.keys()].filter((k) => !granted.has(k))
    expect(missing, "calls without an RBAC grant").toEqual([])
    const unused = [...granted].filter((g) => !calls.has(g))
    expect(unused, "grants no call needs").toEqual([])
    // A reservation is created only to give back one a reborn pod took back, and only there.
    expect([...(calls.get("whereabouts.cni.cncf.io/overlappingrangeipreservations create") ?? [])]).toEqual(["src/services/Reservations.ts"])
    for (const f of readdirSync(join(ROOT, "src/programs")).filter((n) => n.endsWith(".ts"))) {
      const src = readFileSync(join(ROOT, "src/programs", f), "utf8")
      if (RESTORES_RESERVATIONS.has(`src/programs/${f}`)) continue
      expect(src, `src/programs/${f} restores reservations`).not.toMatch(/\.\s*restore\s*\(/)
    }
  })
})
