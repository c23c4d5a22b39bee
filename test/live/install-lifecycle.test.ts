/**
 * docs/install.md's commands, run as written on an API server of this file's own that already
 * runs whereabouts 0.9.2 (its CRDs and install manifests from its Go module, applied with kubectl;
 * pools, reservations and a NodeSlicePool as the plugin writes them): install → upgrade (another
 * image tag and log level) → roll back → uninstall, with kustomize and with Helm, also beside
 * upstream's node-slice controller (a Deployment of the project's name). Afterwards every
 * object of whereabouts' is exactly what it was (resourceVersion, labels, annotations,
 * managedFields and all), and nothing of the controller is left. No kubelet runs here, so the
 * Deployment's pods never start and nothing is freed: any difference would be the manifests'.
 * Its own API servers: upstream's CRDs replace the tier's copies, and Helm's keep policy is tried
 * on one more that never had whereabouts' CRDs (deleting CRDs to make room once hung past the test's
 * timeout under CI's load).
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, expect, it, onTestFinished } from "vitest"
import { parse, stringify } from "yaml"
import { CHART, DEPLOY, type Found, ROOT, findGoAsset, required } from "../deploy/support/tools.ts"
import { describeLive, envtestAssets } from "../support/live.ts"
import { type ControlPlane, DIR_PREFIX, startControlPlane } from "./cluster.ts"
import { WHEREABOUTS_KINDS, snapshotOf, upstreamCrdDir, upstreamData, upstreamInstallFiles, upstreamNodeSliceController } from "./support/upstream-whereabouts.ts"

type Obj = Record<string, any>
interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const NS = "kube-system"
/** docs/install.md's release name, which gives deploy/'s names. */
const RELEASE = "whereabouts-gc"
const WHEREABOUTS_CRDS = ["ippools", "overlappingrangeipreservations", "nodeslicepools"].map((p) => `${p}.whereabouts.cni.cncf.io`)
/** What the controller creates at run time: leader election's Lease, released (not deleted) at shutdown. */
const LEASE_NAME = "whereabouts-gc"
const LEASE = { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: LEASE_NAME, namespace: NS }, spec: { holderIdentity: "", leaseDurationSeconds: 1, leaseTransitions: 1 } }
/** docs/install.md's clean-up of an install under the earlier names, its commands split into arguments. */
const earlierNamesCleanup = (): ReadonlyArray<ReadonlyArray<string>> => {
  const doc = fs.readFileSync(path.join(ROOT, "docs/install.md"), "utf8")
  const block = /\*\*Installed under the earlier names\*\*[\s\S]*?```sh\n([\s\S]*?)```/.exec(doc)?.[1] ?? ""
  return block.split("\n").map((l) => l.trim()).filter((l) => l.startsWith("kubectl ")).map((l) => l.split(/\s+/).slice(1))
}
/** Every kind the controller's install creates (and the Lease it leaves), for "nothing left behind". */
const OURS = "serviceaccounts,roles,rolebindings,clusterroles,clusterrolebindings,deployments,services,poddisruptionbudgets,leases,secrets,configmaps"

/** Each command's limit, below the tests' own, so a command that hangs fails its test by name. */
const COMMAND_TIMEOUT_MS = 60_000
const exec = (bin: string, args: ReadonlyArray<string>, options: { readonly stdin?: string; readonly env?: NodeJS.ProcessEnv } = {}): Promise<Run> =>
  new Promise((resolve) => {
    const child = execFile(bin, [...args], { maxBuffer: 64 << 20, timeout: COMMAND_TIMEOUT_MS, env: options.env ?? process.env }, (err, stdout, stderr) =>
      resolve({
        code: err === null ? 0 : typeof err.code === "number" ? err.code : 1,
        stdout,
        stderr: err?.killed === true ? `${stderr}\n(killed after ${COMMAND_TIMEOUT_MS / 1000} s)` : stderr
      })
    )
    child.stdin?.end(options.stdin ?? "")
  })

describeLive("install, upgrade, roll back, uninstall where whereabouts already runs (docs/install.md)", () => {
  let plane: ControlPlane | undefined
  /** A cluster that never had whereabouts' CRDs, for Helm's keep policy. */
  let bare: ControlPlane | undefined
  let tools: { readonly helm: string; readonly crds: string } | { readonly reason: string } = { reason: "not looked up yet" }
  let tmp = ""
  const kubectl = () => path.join(envtestAssets(), "kubectl")
  const k = (args: ReadonlyArray<string>, stdin?: string, on = plane) => exec(kubectl(), ["--kubeconfig", on!.kubeconfigPath, ...args], stdin === undefined ? {} : { stdin })
  const ok = async (args: ReadonlyArray<string>, stdin?: string, on = plane): Promise<string> => {
    const out = await k(args, stdin, on)
    expect(out.code, `kubectl ${args.join(" ")}: ${out.stderr}`).toBe(0)
    return out.stdout
  }
  const helm = (args: ReadonlyArray<string>, on = plane) =>
    exec((tools as { helm: string }).helm, [...args, "--kubeconfig", on!.kubeconfigPath], {
      env: { ...process.env, HELM_CONFIG_HOME: path.join(tmp, "helm/config"), HELM_CACHE_HOME: path.join(tmp, "helm/cache"), HELM_DATA_HOME: path.join(tmp, "helm/data") }
    })
  const helmOk = async (args: ReadonlyArray<string>, on = plane): Promise<string> => {
    const out = await helm(args, on)
    expect(out.code, `helm ${args.join(" ")}: ${out.stderr}`).toBe(0)
    return out.stdout
  }

  beforeAll(async () => {
    const found: Record<"helm" | "crds", Found> = { helm: findGoAsset("helm.sh", "HELM"), crds: upstreamCrdDir(required()) }
    const reasons = Object.values(found).flatMap((f) => ("reason" in f ? [f.reason] : []))
    if (reasons.length > 0) {
      if (required()) throw new Error(`WHEREABOUTS_ENVTEST=require but the install tests cannot run: ${reasons.join("; ")}`)
      tools = { reason: reasons.join("; ") }
      return
    }
    tools = { helm: (found.helm as { path: string }).path, crds: (found.crds as { path: string }).path }
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "wac-install-"))
    plane = await startControlPlane(fs.mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX)), envtestAssets())
    bare = await startControlPlane(fs.mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX)), envtestAssets())
  }, 120_000)
  afterAll(async () => {
    await bare?.stop()
    await plane?.stop()
    if (tmp !== "") fs.rmSync(tmp, { recursive: true, force: true })
  })
  const ready = (skip: (note: string) => void): boolean => {
    if ("reason" in tools) skip(tools.reason)
    return !("reason" in tools)
  }

  /** Everything of whereabouts' on the server, exactly as served. */
  const whereabouts = async (): Promise<Record<string, Obj>> => snapshotOf([JSON.parse(await ok(["get", WHEREABOUTS_KINDS.join(","), "-A", "-o", "json"])) as Obj])

  let upstream: Promise<Record<string, Obj>> | undefined
  /** Installs upstream whereabouts as its README does (kubectl apply -f), writes its data; resolves with the snapshot. */
  const installUpstream = () =>
    (upstream ??= (async () => {
      const crdDir = (tools as { crds: string }).crds
      for (const file of upstreamInstallFiles(crdDir)) await ok(["apply", "-f", file])
      await ok(["wait", "--for=condition=Established", "--timeout=60s", ...WHEREABOUTS_CRDS.map((c) => `crd/${c}`)])
      for (const o of upstreamData(NS)) {
        const { status, ...rest } = o as Obj
        await ok(["create", "-f", "-"], JSON.stringify(rest))
        // No status subresource in upstream's NodeSlicePool CRD: its controller writes status with the object.
        if (status !== undefined) await ok(["replace", "-f", "-"], JSON.stringify({ ...o, metadata: JSON.parse(await ok(["get", `${o["kind"]}/${(o["metadata"] as Obj)["name"]}`, "-n", NS, "-o", "json"]))["metadata"] }))
      }
      const snapshot = await whereabouts()
      expect(Object.keys(snapshot).filter((id) => id.startsWith("CustomResourceDefinition/")).toSorted()).toEqual(WHEREABOUTS_CRDS.map((c) => `CustomResourceDefinition//${c}`).toSorted())
      expect(Object.keys(snapshot).filter((id) => /^(IPPool|OverlappingRangeIPReservation|NodeSlicePool)\//.test(id))).toHaveLength(upstreamData(NS).length)
      expect(snapshot["NodeSlicePool/kube-system/slicenet"]?.["status"]?.["allocations"]).toHaveLength(2)
      return snapshot
    })())

  /** Nothing of the controller's is on the server: no object named after it, none labelled part of it, no Helm release. */
  const expectNothingLeft = async (names: ReadonlyArray<string> = [RELEASE], on = plane) => {
    const all = JSON.parse(await ok(["get", OURS, "-A", "-o", "json"], undefined, on)) as Obj
    const left = (all["items"] as Array<Obj>)
      .filter((o) => names.some((n) => String(o["metadata"]["name"]).startsWith(n)) || o["metadata"]["labels"]?.["app.kubernetes.io/part-of"] === "whereabouts-controller" || o["metadata"]["labels"]?.["owner"] === "helm")
      .map((o) => `${o["kind"]}/${o["metadata"]["namespace"] ?? ""}/${o["metadata"]["name"]}`)
    expect(left).toEqual([])
  }

  /** After a failed test too, so the next test starts from whereabouts alone (no-ops after a passing one). */
  const tidyAfter = (...steps: ReadonlyArray<() => Promise<unknown>>) =>
    onTestFinished(async () => {
      for (const step of steps) await step()
      await k(["-n", NS, "delete", "lease", LEASE_NAME, "--ignore-not-found"])
    })
  const uninstall = (release: string) => () => helm(["uninstall", release, "-n", NS, "--ignore-not-found"])

  const deploymentOf = async (name = RELEASE): Promise<Obj> => JSON.parse(await ok(["get", "deployment", name, "-n", NS, "-o", "json"])) as Obj
  const envOf = (d: Obj): Record<string, string> => Object.fromEntries((d["spec"]["template"]["spec"]["containers"][0]["env"] as Array<Obj>).map((e) => [e["name"], e["value"] ?? "(from field)"]))

  it(`Helm with crds.whereabouts=true, on a cluster without whereabouts: \`helm uninstall\` keeps the CRDs (helm.sh/resource-policy: keep)`, async (ctx) => {
    if (!ready((note) => ctx.skip(note))) return
    expect((await k(["get", `crd/${WHEREABOUTS_CRDS[0]}`], undefined, bare)).code, "whereabouts' CRDs must not exist yet").not.toBe(0)
    await helmOk(["install", "demo", CHART, "-n", NS, "--set", "crds.whereabouts=true"], bare)
    const out = await helmOk(["uninstall", "demo", "-n", NS], bare)
    expect(out).toContain("These resources were kept due to the resource policy")
    const kept = JSON.parse(await ok(["get", ...WHEREABOUTS_CRDS.map((c) => `crd/${c}`), "-o", "json"], undefined, bare)) as Obj
    expect(kept["items"]).toHaveLength(WHEREABOUTS_CRDS.length)
    for (const crd of kept["items"] as Array<Obj>) expect(crd["metadata"]["annotations"]["helm.sh/resource-policy"], crd["metadata"]["name"]).toBe("keep")
    await expectNothingLeft(["demo-"], bare)
  }, 120_000)

  /**
   * docs/install.md's kustomize commands: apply -k deploy/ → apply -k a newer copy → apply -k deploy/
   * again → delete -k deploy/ and the Lease. whereabouts' objects stay `before` throughout;
   * `whileInstalled` runs once the release is rolled back, before the uninstall.
   */
  const kustomizeLifecycle = async (before: Record<string, Obj>, whileInstalled: () => Promise<void> = async () => {}) => {
    await ok(["apply", "-k", DEPLOY])
    const installed = await deploymentOf()
    expect(installed["metadata"]["generation"]).toBe(1)
    // The audit Job of deploy/operator/ is accepted next to it (it runs as the ServiceAccount just installed).
    expect((await ok(["apply", "--dry-run=server", "-f", path.join(DEPLOY, "operator/audit-job.yaml")])).trim()).toBe("job.batch/whereabouts-gc-audit created (server dry run)")

    // The next release's deploy/: another image tag and a changed option.
    const next = fs.mkdtempSync(path.join(tmp, "deploy-next-"))
    fs.cpSync(DEPLOY, next, { recursive: true })
    const kustomization = path.join(next, "kustomization.yaml")
    fs.writeFileSync(kustomization, fs.readFileSync(kustomization, "utf8").replace(/newTag: .*/, "newTag: 9.9.9"))
    const deployment = parse(fs.readFileSync(path.join(next, "deployment.yaml"), "utf8")) as Obj
    deployment["spec"]["template"]["spec"]["containers"][0]["env"].push({ name: "LOG_LEVEL", value: "debug" })
    fs.writeFileSync(path.join(next, "deployment.yaml"), stringify(deployment))
    await ok(["apply", "-k", next])
    const upgraded = await deploymentOf()
    expect(upgraded["spec"]["template"]["spec"]["containers"][0]["image"]).toMatch(/:9\.9\.9$/)
    expect(envOf(upgraded)["LOG_LEVEL"]).toBe("debug")

    await ok(["apply", "-k", DEPLOY])
    const rolledBack = await deploymentOf()
    expect(rolledBack["spec"]["template"]).toEqual(installed["spec"]["template"])
    expect(rolledBack["metadata"]["generation"]).toBe(3)

    // The controller ran and left its Lease; whereabouts' data is what it was.
    await ok(["create", "-f", "-"], JSON.stringify(LEASE))
    expect(await whereabouts()).toEqual(before)
    await whileInstalled()

    const dryRun = await ok(["delete", "--dry-run=server", "-k", DEPLOY])
    expect(dryRun).toContain("(server dry run)")
    expect(dryRun).not.toMatch(/customresourcedefinition|whereabouts\.cni\.cncf\.io/)
    const named = await ok(["delete", "--dry-run=server", "-k", DEPLOY, "-o", "name"])
    expect(named.trim().split("\n").toSorted()).toEqual(
      [
        "serviceaccount/whereabouts-gc",
        "clusterrole.rbac.authorization.k8s.io/whereabouts-gc",
        "clusterrolebinding.rbac.authorization.k8s.io/whereabouts-gc",
        "role.rbac.authorization.k8s.io/whereabouts-gc",
        "rolebinding.rbac.authorization.k8s.io/whereabouts-gc",
        "deployment.apps/whereabouts-gc",
        "poddisruptionbudget.policy/whereabouts-gc",
        "service/whereabouts-gc-metrics"
      ].toSorted()
    )
    // docs/install.md's uninstall, as one line.
    await ok(["delete", "-k", DEPLOY])
    await ok(["-n", NS, "delete", "lease", LEASE_NAME, "--ignore-not-found"])
    await expectNothingLeft()
    expect(await whereabouts()).toEqual(before)
  }

  /** docs/install.md's Helm commands: install → upgrade --set → rollback → uninstall and the Lease. */
  const helmLifecycle = async (before: Record<string, Obj>) => {
    const install = await helmOk(["install", RELEASE, CHART, "-n", NS])
    expect(install).toContain("Audit first: the start-up sweep frees at once")
    expect(install).toContain(`kubectl -n ${NS} exec deploy/${RELEASE} -- /nodejs/bin/node /app/dist/main.js audit\n`)
    const installed = await deploymentOf()
    expect(installed["spec"]["template"]["spec"]["serviceAccountName"]).toBe(RELEASE)
    expect(envOf(installed)["LOG_LEVEL"]).toBeUndefined()

    await helmOk(["upgrade", RELEASE, CHART, "-n", NS, "--reset-then-reuse-values", "--set", "config.logLevel=debug"])
    expect(envOf(await deploymentOf())["LOG_LEVEL"]).toBe("debug")

    await helmOk(["rollback", RELEASE, "-n", NS])
    const rolledBack = await deploymentOf()
    expect(rolledBack["spec"]["template"]).toEqual(installed["spec"]["template"])
    const history = JSON.parse(await helmOk(["history", RELEASE, "-n", NS, "-o", "json"])) as Array<Obj>
    expect(history.map((r) => `${r["revision"]} ${r["status"]}`)).toEqual(["1 superseded", "2 superseded", "3 deployed"])

    await ok(["create", "-f", "-"], JSON.stringify(LEASE))
    expect(await whereabouts()).toEqual(before)

    await helmOk(["uninstall", RELEASE, "-n", NS])
    await ok(["-n", NS, "delete", "lease", LEASE_NAME, "--ignore-not-found"])
    await expectNothingLeft()
    expect(await whereabouts()).toEqual(before)
  }

  it("kustomize: apply -k deploy/ → apply -k a newer copy → apply -k deploy/ again → delete -k deploy/: whereabouts untouched, nothing of ours left", async (ctx) => {
    if (!ready((note) => ctx.skip(note))) return
    const before = await installUpstream()
    tidyAfter(() => k(["delete", "-k", DEPLOY, "--ignore-not-found"]))
    await kustomizeLifecycle(before)
  }, 180_000)

  it("Helm: install → upgrade --set → rollback → uninstall: whereabouts untouched, nothing of ours left; NOTES print the audit command", async (ctx) => {
    if (!ready((note) => ctx.skip(note))) return
    const before = await installUpstream()
    tidyAfter(uninstall(RELEASE))
    await helmLifecycle(before)
  }, 180_000)

  it("docs/install.md's clean-up of an install under the earlier names (whereabouts-controller) removes all of it and nothing of whereabouts'", async (ctx) => {
    if (!ready((note) => ctx.skip(note))) return
    const before = await installUpstream()
    const commands = earlierNamesCleanup()
    expect(commands).toHaveLength(3)
    // deploy/ as it was before the objects were renamed, with the Lease such a controller held.
    const earlier = (await ok(["kustomize", DEPLOY])).replaceAll("whereabouts-gc", "whereabouts-controller")
    tidyAfter(() => k(["delete", "-f", "-", "--ignore-not-found"], earlier))
    await ok(["apply", "-f", "-"], earlier)
    await ok(["create", "-f", "-"], JSON.stringify({ ...LEASE, metadata: { ...LEASE.metadata, name: "whereabouts-controller" } }))
    expect((await deploymentOf("whereabouts-controller"))["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]).toBe("whereabouts-controller")

    for (const args of commands) await ok(args)
    await expectNothingLeft(["whereabouts-controller"])
    expect(await whereabouts()).toEqual(before)
  }, 120_000)

  it("Helm refuses to take over whereabouts' CRDs (crds.whereabouts=true where they exist) and changes nothing", async (ctx) => {
    if (!ready((note) => ctx.skip(note))) return
    const before = await installUpstream()
    tidyAfter(uninstall(RELEASE))
    const refused = await helm(["install", RELEASE, CHART, "-n", NS, "--set", "crds.whereabouts=true"])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toMatch(/CustomResourceDefinition "[a-z]+\.whereabouts\.cni\.cncf\.io" in namespace "" exists and cannot be imported into the current release/)
    expect(await whereabouts()).toEqual(before)
    expect(JSON.parse(await helmOk(["list", "-a", "-n", NS, "-o", "json"]))).toEqual([])
    await expectNothingLeft()
  }, 120_000)

  it(`beside upstream's node-slice controller (the Deployment ${NS}/whereabouts-controller): kustomize and Helm install, upgrade, roll back and uninstall, and that Deployment stays exactly as it was`, async (ctx) => {
    if (!ready((note) => ctx.skip(note))) return
    await installUpstream()
    tidyAfter(uninstall(RELEASE), () => k(["delete", "-k", DEPLOY, "--ignore-not-found"]))
    // As its docs install it (the file is upstream's own, from its module); it stays for the rest of this server's life.
    await ok(["apply", "-f", upstreamNodeSliceController((tools as { crds: string }).crds)])
    const before = await whereabouts()
    const nodeSlice = before[`Deployment/${NS}/whereabouts-controller`]
    expect(nodeSlice?.["spec"]?.["selector"], "upstream's node-slice controller").toEqual({ matchLabels: { app: "whereabouts-controller" } })

    await kustomizeLifecycle(before, async () => {
      const deployments = (await ok(["-n", NS, "get", "deployments", "-o", "name"])).trim().split("\n")
      expect(deployments).toEqual(expect.arrayContaining(["deployment.apps/whereabouts-controller", "deployment.apps/whereabouts-gc"]))
      // docs/install.md's clean-up of the earlier names selects nothing of upstream's, nor of this install.
      for (const args of earlierNamesCleanup()) expect((await ok([...args, "--dry-run=server", "-o", "name"])).trim(), args.join(" ")).toMatch(/^(No resources found.*)?$/)
    })
    await helmLifecycle(before)
    expect(await whereabouts()).toEqual(before)
  }, 300_000)
})
