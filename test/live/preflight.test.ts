/**
 * `preflight` as an operator runs it, against a real API server: with whereabouts' CRDs (the
 * tier's), without them (a second, fresh API server: the other files need the tier's CRDs), with
 * an under-privileged ServiceAccount (its missing verbs named, whether it runs preflight itself or
 * an admin reviews it), and with upstream's reconciler and control loop deployed.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type CheckRow, UPSTREAM_RUNNING } from "../../src/domain/preflight.ts"
import { CONTROLLER_SERVICE_ACCOUNT, RBAC_NEEDS } from "../../src/domain/rbac-needs.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { poolObject } from "../support/objects.ts"
import { describeLive, envtestAssets, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { DIR_PREFIX, ROOT, startControlPlane } from "./cluster.ts"
import { runCommand } from "./support/controller-process.ts"
import { type Obj, applyObjects, deleteObjects, installation, ruleVerbs, serviceAccountToken, shippedRbac, writeTokenKubeconfig } from "./support/rbac.ts"
import { adminCredentials, createNad, ensureNamespace, liveWorld, restOk } from "./support/world.ts"


/** The kubectl commands of docs/migration.md's "Turn off upstream's freeing" step, as written (without `rollout status`). */
const migrationCommands = (): ReadonlyArray<string> => {
  const doc = fs.readFileSync(path.join(ROOT, "docs/migration.md"), "utf8")
  const step = doc.slice(doc.indexOf("**Turn off upstream's freeing**"), doc.indexOf("**Confirm**"))
  const blocks = [...step.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.split("\n").map((l) => l.trim()).join("\n"))
  return blocks.flatMap((b) => b.split(/\n(?=kubectl )/)).map((c) => c.trim()).filter((c) => c !== "" && !c.includes("rollout status"))
}


interface Report {
  readonly checks: ReadonlyArray<CheckRow>
  readonly summary: Readonly<Record<CheckRow["result"], number>>
}

const report = (stdout: string): Report => JSON.parse(stdout) as Report
const rowsNamed = (r: Report, check: string) => r.checks.filter((c) => c.check === check)
const one = (r: Report, check: string): CheckRow => {
  const found = rowsNamed(r, check)
  if (found.length !== 1) throw new Error(`expected one row "${check}", got ${JSON.stringify(r.checks, null, 2)}`)
  return found[0]!
}

const CRDS = ["ippools.whereabouts.cni.cncf.io", "overlappingrangeipreservations.whereabouts.cni.cncf.io", "nodeslicepools.whereabouts.cni.cncf.io", "network-attachment-definitions.k8s.cni.cncf.io"]

/** Upstream's reconciler Deployment (doc/crds/reconciler-deployment.yaml of v0.9.4) and DaemonSet (daemonset-install.yaml), trimmed to what identifies them. */
const upstreamObjects = (namespace: string): ReadonlyArray<Obj> => [
  ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "whereabouts-reconciler", namespace, labels: { tier: "node", app: "whereabouts-reconciler" } },
    spec: {
      replicas: 1,
      selector: { matchLabels: { name: "whereabouts-reconciler" } },
      template: {
        metadata: { labels: { tier: "node", app: "whereabouts-reconciler", name: "whereabouts-reconciler" } },
        spec: { containers: [{ name: "whereabouts-reconciler", image: "ghcr.io/k8snetworkplumbingwg/whereabouts:v0.9.4", command: ["/ip-reconciler"], args: ["-log-level", "debug"] }] }
      }
    }
  }) as Obj,
  ({
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "whereabouts", namespace, labels: { tier: "node", app: "whereabouts" } },
    spec: {
      selector: { matchLabels: { name: "whereabouts" } },
      template: {
        metadata: { labels: { tier: "node", app: "whereabouts", name: "whereabouts" } },
        spec: {
          containers: [
            {
              name: "whereabouts",
              image: "ghcr.io/k8snetworkplumbingwg/whereabouts:v0.9.2",
              command: ["/bin/sh"],
              args: ["-c", "SLEEP=false source /install-cni.sh\n/token-watcher.sh &\n/ip-control-loop -log-level debug\n"]
            }
          ]
        }
      }
    }
  }) as Obj
]

const appsPath = (o: Obj, withName: boolean) => `/apis/apps/v1/namespaces/${o.metadata.namespace}/${o.kind.toLowerCase()}s${withName ? `/${o.metadata.name}` : ""}`

describeLive("preflight against a real API server", () => {
  const POOLS = uniqueNamespace("pre-pools")
  const run = (args: ReadonlyArray<string>, kubeconfig = runningEnvtest().kubeconfigPath) => Effect.promise(() => runCommand("preflight", { kubeconfig, namespace: POOLS, args }))

  it.live("with whereabouts' CRDs: all four served, the caller's access enough, no upstream component; a NAD it cannot read and a full pool warn; exit 0", () =>
    Effect.gen(function* () {
      const ns = uniqueNamespace("pre")
      yield* ensureNamespace(POOLS)
      yield* ensureNamespace(ns)
      yield* createNad(ns, "net", { range: "10.170.0.0/29" })
      yield* createNad(ns, "broken", "{not json")
      yield* createNad(ns, "other", JSON.stringify({ cniVersion: "0.3.1", name: "other", type: "macvlan", ipam: { type: "host-local", subnet: "10.171.0.0/24" } }))
      // Not ours, so not warned about (as audit and the controller judge them): no IPAM, a config on the nodes' disks.
      yield* createNad(ns, "no-ipam", JSON.stringify({ cniVersion: "0.3.1", name: "no-ipam", type: "bridge" }))
      yield* createNad(ns, "on-disk", "")
      const full = Object.fromEntries([1, 2, 3, 4, 5, 6].map((i) => [String(i), { id: `c${i}`, podref: `${ns}/p${i}`, ifname: "net1" }]))
      yield* Effect.flatMap(KubeApi, (api) => api.create(R.IPPools, POOLS, poolObject(POOLS, "10.170.0.0-29", "10.170.0.0/29", full)))

      const out = yield* run(["-o", "json"])
      expect(out.code, out.stderr).toBe(0)
      const r = report(out.stdout)
      for (const crd of CRDS) expect(one(r, `CRD ${crd}`)).toMatchObject({ result: "ok", detail: "installed and served" })
      // No ServiceAccount of the controller in POOLS yet: the caller's own access is what is reviewed.
      expect(one(r, "RBAC")).toEqual({
        check: "RBAC",
        result: "ok",
        detail: `all ${RBAC_NEEDS.length} verbs the controller needs are allowed for the caller (admin) (no ServiceAccount ${POOLS}/${CONTROLLER_SERVICE_ACCOUNT}: the caller's own access)`
      })
      expect(one(r, "upstream ip-control-loop").result).toBe("ok")
      expect(one(r, "upstream ip-reconciler").result).toBe("ok")
      expect(one(r, `NAD ${ns}/broken`)).toMatchObject({ result: "warn", detail: expect.stringContaining("cannot read its IPAM config: spec.config is not valid JSON") })
      expect(rowsNamed(r, `NAD ${ns}/net`)).toEqual([])
      expect(rowsNamed(r, `NAD ${ns}/other`)).toEqual([])
      expect(rowsNamed(r, `NAD ${ns}/no-ipam`)).toEqual([])
      expect(rowsNamed(r, `NAD ${ns}/on-disk`)).toEqual([])
      expect(one(r, "pool 10.170.0.0-29")).toEqual({
        check: "pool 10.170.0.0-29",
        result: "warn",
        detail: "IPPool 10.170.0.0-29 is 100% used (6 of 6 addresses), at or over the 90% threshold"
      })
      expect(r.summary.fail).toBe(0)

      // The table: the same rows for a person.
      const table = yield* run([])
      expect(table.code, table.stderr).toBe(0)
      expect(table.stdout.split("\n")[0]).toMatch(/^CHECK +RESULT +DETAIL$/)
      expect(table.stdout).toMatch(new RegExp(`^RBAC +ok +all ${RBAC_NEEDS.length} verbs`, "m"))
      expect(table.stdout).toMatch(/^pool 10\.170\.0\.0-29 +warn +IPPool 10\.170\.0\.0-29 is 100% used/m)
      expect(table.stdout.trimEnd().split("\n").at(-1)).toMatch(/^\d+ ok, \d+ warnings?, 0 failures: ready; read the warnings\.$/)
    }).pipe(Effect.provide(liveWorld(POOLS))), 60_000)

  it.live("an under-privileged ServiceAccount: the RBAC row fails naming each missing verb, run as that ServiceAccount or reviewed by an admin; the shipped RBAC passes; exit 1", () =>
    Effect.gen(function* () {
      const admin = adminCredentials()
      yield* ensureNamespace(POOLS)
      const rbac = shippedRbac()
      const patchPools = ruleVerbs(rbac).find((v) => v.kind === "Role" && v.resource === "ippools" && v.verb === "patch")!
      const weak = installation(rbac, { namespace: POOLS, name: `pre-weak-${POOLS}`, remove: patchPools })
      // And a second verb gone: delete on reservations.
      const weaker = weak.objects.map((o) =>
        o.kind !== "Role"
          ? o
          : { ...o, rules: (o["rules"] as ReadonlyArray<{ resources: ReadonlyArray<string>; verbs: ReadonlyArray<string> }>).map((r) => (r.resources.includes("overlappingrangeipreservations") ? { ...r, verbs: r.verbs.filter((v) => v !== "delete") } : r)) }
      )
      const shipped = installation(rbac, { namespace: POOLS, name: `pre-full-${POOLS}` })
      yield* applyObjects(admin, [...weaker, ...shipped.objects])
      yield* Effect.gen(function* () {
        const missing = `missing: patch ippools in ${POOLS}, delete overlappingrangeipreservations in ${POOLS}`
        const token = yield* serviceAccountToken(admin, weak.saNamespace, weak.serviceAccount)
        const kubeconfig = writeTokenKubeconfig(path.join(fs.mkdtempSync(path.join(os.tmpdir(), "preflight-sa-")), "kubeconfig"), admin, weak.serviceAccount, token)

        // As the ServiceAccount itself (preflight run in its pod): its own access, by SelfSubjectAccessReview.
        const asSa = yield* run(["-o", "json"], kubeconfig)
        expect(asSa.code, asSa.stderr).toBe(1)
        const self = report(asSa.stdout)
        expect(one(self, "RBAC")).toEqual({
          check: "RBAC",
          result: "fail",
          detail: `${missing}; for the caller (system:serviceaccount:kube-system:${weak.serviceAccount}) (cannot read ServiceAccount ${POOLS}/${CONTROLLER_SERVICE_ACCOUNT}: the caller's own access)`
        })
        // What it may not look at is said, not guessed: it cannot list DaemonSets.
        expect(one(self, "upstream ip-control-loop")).toMatchObject({ result: "warn", detail: expect.stringMatching(/^could not look for it: list daemonsets: Forbidden/) })
        for (const crd of CRDS) expect(one(self, `CRD ${crd}`).result).toBe("ok")

        // Reviewed by an admin: a SubjectAccessReview for the ServiceAccount.
        const reviewed = yield* run(["--as-service-account", `kube-system/${weak.serviceAccount}`, "-o", "json"])
        expect(reviewed.code, reviewed.stderr).toBe(1)
        expect(one(report(reviewed.stdout), "RBAC")).toEqual({ check: "RBAC", result: "fail", detail: `${missing}; for ServiceAccount kube-system/${weak.serviceAccount}` })

        // The ServiceAccount may not review another one: its own access instead, and the row says so.
        const cannot = yield* run(["--as-service-account", `kube-system/${shipped.serviceAccount}`, "-o", "json"], kubeconfig)
        expect(cannot.code, cannot.stderr).toBe(1)
        expect(one(report(cannot.stdout), "RBAC").detail).toBe(
          `${missing}; for the caller (system:serviceaccount:kube-system:${weak.serviceAccount}) (cannot review ServiceAccount kube-system/${shipped.serviceAccount}: forbidden to create subjectaccessreviews)`
        )

        // deploy/'s RBAC as shipped is enough, resourceNames included (the Lease and the ConfigMap in --namespace).
        const full = yield* run(["--as-service-account", `kube-system/${shipped.serviceAccount}`, "-o", "json"])
        expect(full.code, full.stderr).toBe(0)
        expect(one(report(full.stdout), "RBAC")).toEqual({
          check: "RBAC",
          result: "ok",
          detail: `all ${RBAC_NEEDS.length} verbs the controller needs are allowed for ServiceAccount kube-system/${shipped.serviceAccount}`
        })
      }).pipe(Effect.ensuring(Effect.orDie(deleteObjects(admin, [...weak.objects, ...shipped.objects]))))
    }).pipe(Effect.provide(liveWorld(POOLS))), 60_000)

  it.live("upstream's reconciler Deployment and control-loop DaemonSet present: a warning each, pointing at docs/migration.md; exit 0", () =>
    Effect.gen(function* () {
      const admin = adminCredentials()
      const ns = uniqueNamespace("upstream")
      yield* ensureNamespace(POOLS)
      yield* ensureNamespace(ns)
      const objects = upstreamObjects(ns)
      for (const o of objects) yield* restOk(admin, "POST", appsPath(o, false), o, [201])
      yield* Effect.gen(function* () {
        const out = yield* run(["-o", "json"])
        expect(out.code, out.stderr).toBe(0)
        const r = report(out.stdout)
        expect(one(r, "upstream ip-reconciler")).toEqual({ check: "upstream ip-reconciler", result: "warn", detail: `Deployment ${ns}/whereabouts-reconciler: ${UPSTREAM_RUNNING}` })
        expect(one(r, "upstream ip-control-loop")).toEqual({ check: "upstream ip-control-loop", result: "warn", detail: `DaemonSet ${ns}/whereabouts: ${UPSTREAM_RUNNING}` })

        // docs/migration.md's step 4, run as written (its namespace this test's): the reconciler
        // scaled to 0, the control loop patched out of the DaemonSet's script; `rollout status`
        // waits for a DaemonSet controller this tier does not run, so it is left out.
        const commands = migrationCommands().map((c) => c.replaceAll("kube-system", ns))
        expect(commands.map((c) => c.split(" ").slice(0, 5).join(" "))).toEqual([
          `kubectl -n ${ns} scale deployment`,
          `kubectl -n ${ns} patch daemonset`
        ])
        for (const c of commands) {
          const done = spawnSync("bash", ["-c", c], { encoding: "utf8", env: { ...process.env, KUBECONFIG: runningEnvtest().kubeconfigPath, PATH: `${envtestAssets()}:${process.env["PATH"] ?? ""}` } })
          expect(done.status, `${c}\n${done.stderr}`).toBe(0)
        }
        const migrated = report((yield* run(["-o", "json"])).stdout)
        expect(one(migrated, "upstream ip-reconciler")).toEqual({ check: "upstream ip-reconciler", result: "ok", detail: `Deployment ${ns}/whereabouts-reconciler is scaled to 0` })
        expect(one(migrated, "upstream ip-control-loop").result).toBe("ok")
        // The plugin installer and the token watcher stay.
        const ds = yield* restOk(admin, "GET", appsPath(objects[1]!, true))
        expect(JSON.stringify(ds)).toContain("SLEEP=false source /install-cni.sh\\n/token-watcher.sh &\\nwait")
      }).pipe(Effect.ensuring(Effect.forEach(objects, (o) => Effect.orDie(restOk(admin, "DELETE", appsPath(o, true), undefined, [200, 202, 404])), { discard: true })))
    }).pipe(Effect.provide(liveWorld(POOLS))), 60_000)

  it.live("without whereabouts' CRDs (a second, fresh API server): the IPPool and reservation CRDs fail with what to do, the NodeSlicePool and NAD CRDs warn; exit 1; that server stopped: exit 3", () =>
    Effect.gen(function* () {
      const assets = envtestAssets()
      const plane = yield* Effect.promise(() => startControlPlane(fs.mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX)), assets))
      yield* Effect.gen(function* () {
        const out = yield* run(["-o", "json"], plane.kubeconfigPath)
        expect(out.code, out.stderr).toBe(1)
        const r = report(out.stdout)
        const hint = "not installed: install whereabouts first, or apply deploy/components/whereabouts-crds on a test cluster"
        expect(one(r, "CRD ippools.whereabouts.cni.cncf.io")).toMatchObject({ result: "fail", detail: hint })
        expect(one(r, "CRD overlappingrangeipreservations.whereabouts.cni.cncf.io")).toMatchObject({ result: "fail", detail: hint })
        expect(one(r, "CRD nodeslicepools.whereabouts.cni.cncf.io")).toMatchObject({ result: "warn", detail: expect.stringContaining("before 0.8") })
        expect(one(r, "CRD network-attachment-definitions.k8s.cni.cncf.io")).toMatchObject({ result: "warn", detail: expect.stringContaining("no Multus") })
        expect(one(r, "NAD configs")).toMatchObject({ result: "warn", detail: expect.stringMatching(/^not checked: /) })
        expect(one(r, "RBAC").result).toBe("ok")
        expect(r.summary.fail).toBe(2)

        yield* Effect.promise(() => plane.stopApiServer())
        const down = yield* run(["-o", "json"], plane.kubeconfigPath)
        expect(down.code).toBe(3)
        expect(down.stdout).toBe("")
        expect(down.stderr.trimEnd().split("\n").at(-1)).toMatch(/^[\w-]+: list ippools: Unavailable/)
      }).pipe(Effect.ensuring(Effect.promise(() => plane.stop())))
    }), 120_000)
})
