/**
 * deploy/ as kustomize renders it (`kubectl kustomize`, kubectl from the envtest assets): the
 * restricted security context, probes, replicas, least-privilege RBAC pinned verb by verb, and
 * a Deployment whose environment the controller's own Config definition actually reads.
 * Server-side validation (dry-run apply against a real API server) belongs to the live tier.
 */
import { readFileSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { Duration, Either } from "effect"
import { describe, expect, it } from "vitest"
import * as R from "../../src/services/resources.ts"
import { shutdownDeadline } from "../../src/services/ControllerConfig.ts"
import { loadConfig, resolveEnv } from "./support/config.ts"
import { DEPLOY, EXPECTED_RBAC, type Obj, ROOT, findKubectl, idOf, kustomize, kustomizeWith, rbacRows, required } from "./support/tools.ts"

const NAMESPACE = "kube-system"
const IMAGE = "ghcr.io/whereabouts-controller/whereabouts-controller"

const found = findKubectl()
if ("reason" in found) {
  if (required()) throw new Error(`WHEREABOUTS_ENVTEST=require but kubectl is unavailable: ${found.reason}`)
  console.warn(`test/deploy/manifests.test.ts skipped: ${found.reason}`)
}

const one = (objects: ReadonlyArray<Obj>, kind: string): Obj => {
  const all = objects.filter((o) => o["kind"] === kind)
  expect(all, `exactly one ${kind}`).toHaveLength(1)
  return all[0]!
}

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

const suite = "path" in found ? describe : describe.skip
const title = "path" in found ? "deploy/ (kubectl kustomize)" : `deploy/ (kubectl kustomize) — skipped: ${found.reason}`

suite(title, () => {
  const kubectl = "path" in found ? found.path : ""
  const objects = "path" in found ? kustomize(kubectl, DEPLOY) : []
  const deployment = () => one(objects, "Deployment")
  const podSpec = () => deployment()["spec"]["template"]["spec"] as Obj
  const containers = () => [...(podSpec()["initContainers"] ?? []), ...podSpec()["containers"]] as Array<Obj>

  it("renders exactly the controller's objects, namespaced ones in kube-system, no CRD by default", () => {
    expect(objects.map(idOf).toSorted()).toEqual(
      [
        `ServiceAccount/${NAMESPACE}/whereabouts-gc`,
        "ClusterRole//whereabouts-gc",
        "ClusterRoleBinding//whereabouts-gc",
        `Role/${NAMESPACE}/whereabouts-gc`,
        `RoleBinding/${NAMESPACE}/whereabouts-gc`,
        `Deployment/${NAMESPACE}/whereabouts-gc`,
        `PodDisruptionBudget/${NAMESPACE}/whereabouts-gc`,
        `Service/${NAMESPACE}/whereabouts-gc-metrics`
      ].toSorted()
    )
  })

  it("holds nothing of whereabouts' (no CRD, no object of its group), so `kubectl delete -k deploy/` cannot delete any", () => {
    expect(objects.filter((o) => o["kind"] === "CustomResourceDefinition").map(idOf)).toEqual([])
    expect(objects.filter((o) => String(o["apiVersion"]).startsWith(`${R.IPPools.group}/`)).map(idOf)).toEqual([])
    // Nor do names collide with whereabouts' own objects of a 0.9 install (its daemonset-install.yaml,
    // and node-slice-controller.yaml's Deployment).
    const upstream = ["ServiceAccount/kube-system/whereabouts", "ClusterRole//whereabouts-cni", "ClusterRoleBinding//whereabouts", "ConfigMap/kube-system/whereabouts-config", "DaemonSet/kube-system/whereabouts", "Deployment/kube-system/whereabouts-controller"]
    expect(objects.map(idOf).filter((id) => upstream.includes(id))).toEqual([])
  })

  it("the whereabouts-crds component composes with deploy/ and adds only whereabouts' three CRDs, labelled as ours", () => {
    const withCrds = kustomizeWith(kubectl, ["whereabouts-crds"])
    const added = withCrds.filter((o) => !objects.some((b) => idOf(b) === idOf(o)))
    expect(added.map(idOf).toSorted()).toEqual(
      [R.IPPools, R.OverlappingRangeIPReservations, R.NodeSlicePools].map((r) => `CustomResourceDefinition//${r.plural}.${r.group}`).toSorted()
    )
    expect(withCrds).toHaveLength(objects.length + 3)
    for (const crd of added) expect(crd["metadata"]["labels"], idOf(crd)).toEqual({ "app.kubernetes.io/part-of": "whereabouts-controller", "app.kubernetes.io/managed-by": "kustomize" })
    // deploy/'s own objects come out of the composition as they are without it.
    for (const o of objects) expect(withCrds.find((w) => idOf(w) === idOf(o)), idOf(o)).toEqual(o)
  })

  it("the nad-crd component composes with deploy/ and adds only the NetworkAttachmentDefinition CRD", () => {
    const withNad = kustomizeWith(kubectl, ["nad-crd"])
    const added = withNad.filter((o) => !objects.some((b) => idOf(b) === idOf(o)))
    expect(added.map(idOf)).toEqual(["CustomResourceDefinition//network-attachment-definitions.k8s.cni.cncf.io"])
    expect(added[0]!["spec"]["names"]["plural"]).toBe(R.NetworkAttachmentDefinitions.plural)
    expect(withNad).toHaveLength(objects.length + 1)
  })

  it("the component's CRDs serve the group, version and plurals the controller uses", () => {
    const crds = kustomizeWith(kubectl, ["whereabouts-crds"]).filter((o) => o["kind"] === "CustomResourceDefinition")
    for (const r of [R.IPPools, R.OverlappingRangeIPReservations, R.NodeSlicePools]) {
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
    const env = resolveEnv(d, c, "whereabouts-gc-7d9f8-abcde")
    const { read, result } = loadConfig(env)
    // Sanity: the recording saw the keys the config is known to have.
    expect(read).toContain("WHEREABOUTS_NAMESPACE")
    expect(read).toContain("SHUTDOWN_TIMEOUT")
    expect([...env.keys()].filter((k) => !read.has(k)), "env vars ControllerConfig does not read").toEqual([])
    if (Either.isLeft(result)) throw new Error(`the Deployment's env does not decode: ${String(result.left)}`)
    const cfg = result.right
    expect(cfg.namespace).toBe(NAMESPACE)
    expect(cfg.leaderElect).toBe(true)
    expect(cfg.identity).toBe("whereabouts-gc-7d9f8-abcde")
    expect(cfg.leaseNamespace).toBe(d["metadata"]["namespace"])
    const ports = new Map((c["ports"] as Array<Obj>).map((p) => [p["name"], p["containerPort"]]))
    expect(cfg.healthPort).toBe(ports.get("health"))
    expect(cfg.metricsPort).toBe(ports.get("metrics"))
    // SIGTERM → drain for at most SHUTDOWN_TIMEOUT → release the lease within leader election's
    // renew deadline → the rest, or the controller's own exit at its deadline: the kubelet must wait longer.
    const ownDeadline = shutdownDeadline(cfg.shutdownTimeout)
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
