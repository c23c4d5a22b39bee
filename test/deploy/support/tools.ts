/**
 * What the deploy/ and chart tests share: the binaries they run (kubectl from the envtest assets,
 * helm and promtool from scripts/helm.sh and scripts/promtool.sh), rendering (kustomize, helm
 * template), and deploy/'s RBAC pinned row by row. A binary that is not cached skips the tests
 * that need it with one line saying why; under WHEREABOUTS_ENVTEST=require the scripts may build
 * it, and a missing one fails the run.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { parseAllDocuments } from "yaml"

export const ROOT = fileURLToPath(new URL("../../..", import.meta.url))
export const DEPLOY = join(ROOT, "deploy")
export const CHART = join(ROOT, "charts/whereabouts-controller")

/** Rendered manifests, read loosely: the assertions themselves check the shape. */
export type Obj = Record<string, any>

export type Found = { readonly path: string } | { readonly reason: string }

export const required = (): boolean => process.env["WHEREABOUTS_ENVTEST"] === "require"

const executable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** kubectl from KUBEBUILDER_ASSETS, else from the script's cache (built only when required). */
export const findKubectl = (): Found => {
  const assets = process.env["KUBEBUILDER_ASSETS"]
  if (assets !== undefined && assets !== "") {
    const kubectl = join(assets, "kubectl")
    return executable(kubectl) ? { path: kubectl } : { reason: `KUBEBUILDER_ASSETS=${assets} has no kubectl` }
  }
  const run = spawnSync("bash", [join(ROOT, "scripts/envtest-assets.sh")], {
    encoding: "utf8",
    env: required() ? process.env : { ...process.env, ENVTEST_ASSETS_NO_BUILD: "1" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const dir = run.stdout.trim()
  if (run.status !== 0 || dir === "") {
    return { reason: "no envtest assets yet (run scripts/envtest-assets.sh once, or set KUBEBUILDER_ASSETS)" }
  }
  const kubectl = join(dir, "kubectl")
  return executable(kubectl) ? { path: kubectl } : { reason: `${dir} has no kubectl` }
}

const ASSETS = { "helm.sh": "HELM", "promtool.sh": "PROMTOOL", "actionlint.sh": "ACTIONLINT", "prometheus-operator-crds.sh": "PROMETHEUS_OPERATOR_CRDS" } as const

/**
 * What scripts/helm.sh, promtool.sh, actionlint.sh or prometheus-operator-crds.sh provide (a
 * binary; the last a directory of CRDs): the override variable (HELM, PROMTOOL, ACTIONLINT,
 * PROMETHEUS_OPERATOR_CRDS) or the script's cache; built only when required.
 */
export const findGoAsset = <S extends keyof typeof ASSETS>(script: S, override: (typeof ASSETS)[S]): Found => {
  const run = spawnSync("bash", [join(ROOT, "scripts", script)], {
    encoding: "utf8",
    env: required() ? process.env : { ...process.env, [`${override}_NO_BUILD`]: "1" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const path = run.stdout.trim()
  if (run.status === 0 && path !== "" && executable(path)) return { path }
  const said = run.stderr.trim().split("\n").at(-1) ?? ""
  return { reason: `nothing from scripts/${script} (run it once, or set ${override}): ${said}` }
}

/** Every binary found, or the reasons; throws under WHEREABOUTS_ENVTEST=require instead of skipping. */
export const needAll = <K extends string>(file: string, found: Readonly<Record<K, Found>>): { readonly [P in K]: string } | { readonly reason: string } => {
  const reasons = Object.values<Found>(found).flatMap((f) => ("reason" in f ? [f.reason] : []))
  if (reasons.length === 0) return Object.fromEntries(Object.entries<Found>(found).map(([k, f]) => [k, (f as { path: string }).path])) as { [P in K]: string }
  const reason = reasons.join("; ")
  if (required()) throw new Error(`WHEREABOUTS_ENVTEST=require but ${file} cannot run: ${reason}`)
  console.warn(`${file} skipped: ${reason}`)
  return { reason }
}

export const parseObjects = (text: string, what: string): Array<Obj> =>
  parseAllDocuments(text).flatMap((d) => {
    if (d.errors.length > 0) throw new Error(`unparsable ${what}: ${d.errors[0]!.message}`)
    const o = d.toJS() as Obj | null
    return o === null ? [] : [o]
  })

export const kustomize = (kubectl: string, dir: string): Array<Obj> =>
  parseObjects(execFileSync(kubectl, ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }), "kustomize output")

/**
 * deploy/ composed with components from a kustomization outside it (one inside deploy/ cannot
 * include ../../: kustomize reports a cycle), as the README tells users to.
 */
export const kustomizeWith = (kubectl: string, components: ReadonlyArray<string>): Array<Obj> => {
  const dir = mkdtempSync(join(tmpdir(), "wac-kustomize-"))
  try {
    writeFileSync(
      join(dir, "kustomization.yaml"),
      [
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
        `resources: [${JSON.stringify(relative(dir, DEPLOY))}]`,
        `components: [${components.map((c) => JSON.stringify(relative(dir, join(DEPLOY, "components", c)))).join(", ")}]`
      ].join("\n")
    )
    return kustomize(kubectl, dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export interface HelmRun {
  readonly code: number | null
  readonly stdout: string
  /** helm's stderr without its notes about the symbolic links in files/ (they point into deploy/). */
  readonly stderr: string
}

export const helm = (helmPath: string, args: ReadonlyArray<string>): HelmRun => {
  const run = spawnSync(helmPath, [...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 << 20 })
  const stderr = run.stderr
    .split("\n")
    .filter((l) => !/found symbolic link in path: .* Contents of linked file included and used$/.test(l))
    .join("\n")
    .trim()
  return { code: run.status, stdout: run.stdout, stderr }
}

/** The release name that makes the chart's names deploy/'s (`whereabouts-gc`), as docs/install.md installs it. */
export const RELEASE = "whereabouts-gc"

/** `helm template` of the chart in kube-system, `--set` each of `sets`; throws with helm's message when it fails. */
export const helmTemplate = (helmPath: string, sets: ReadonlyArray<string> = [], options: { readonly release?: string; readonly namespace?: string } = {}): Array<Obj> => {
  const run = helm(helmPath, ["template", options.release ?? RELEASE, CHART, "--namespace", options.namespace ?? "kube-system", ...sets.flatMap((s) => ["--set", s])])
  if (run.code !== 0) throw new Error(`helm template failed: ${run.stderr}`)
  return parseObjects(run.stdout, "helm template output")
}

export const idOf = (o: Obj): string => `${o["kind"]}/${o["metadata"]?.["namespace"] ?? ""}/${o["metadata"]?.["name"]}`

/** Every grant of deploy/, one row per (role, apiGroup, resource, resourceNames); verbs sorted. Change only on purpose. */
export const EXPECTED_RBAC: ReadonlyArray<string> = [
  // ClusterRole: cluster-wide reads of pods and NADs, Events next to the pods.
  "ClusterRole whereabouts-gc | core/pods | get,list,watch",
  "ClusterRole whereabouts-gc | core/nodes | get,list,watch",
  "ClusterRole whereabouts-gc | k8s.cni.cncf.io/network-attachment-definitions | list,watch",
  "ClusterRole whereabouts-gc | core/events | create,patch",
  // Role in kube-system: the pools, their reservations and the leader Lease.
  "Role kube-system/whereabouts-gc | whereabouts.cni.cncf.io/ippools | delete,get,list,patch,watch",
  "Role kube-system/whereabouts-gc | whereabouts.cni.cncf.io/nodeslicepools | get,list,watch",
  "Role kube-system/whereabouts-gc | whereabouts.cni.cncf.io/overlappingrangeipreservations | create,delete,get,list,watch",
  "Role kube-system/whereabouts-gc | core/configmaps[whereabouts-config] | get,list,watch",
  "Role kube-system/whereabouts-gc | coordination.k8s.io/leases | create",
  "Role kube-system/whereabouts-gc | coordination.k8s.io/leases[whereabouts-gc] | get,update"
].toSorted()

export const rbacRows = (objects: ReadonlyArray<Obj>): Array<string> =>
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
