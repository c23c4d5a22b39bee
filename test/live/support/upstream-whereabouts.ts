/**
 * A cluster that already runs whereabouts, for the install tests: upstream 0.9.2's own CRDs and
 * install manifests, read from its Go module (the one scripts/whereabouts-plugin.sh builds the
 * plugin from), applied with kubectl as upstream's README says, plus pools, reservations and a
 * NodeSlicePool as the plugin and its node-slice controller write them; and a snapshot of all of
 * it, to show afterwards that nothing was touched.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Found } from "../../deploy/support/tools.ts"

export const UPSTREAM_MODULE = "github.com/k8snetworkplumbingwg/whereabouts"
/** scripts/whereabouts-plugin.sh's default: the version the live tier's plugin is. */
export const UPSTREAM_VERSION = "v0.9.2"
const CRD_FILES = ["whereabouts.cni.cncf.io_ippools.yaml", "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml", "whereabouts.cni.cncf.io_nodeslicepools.yaml"]

/**
 * The module's doc/crds directory, from the Go module cache; the proxy is asked only when
 * `mayDownload` (under WHEREABOUTS_ENVTEST=require), else the cache alone answers.
 */
export const upstreamCrdDir = (mayDownload: boolean): Found => {
  const module = `${UPSTREAM_MODULE}@${UPSTREAM_VERSION}`
  const run = spawnSync("go", ["mod", "download", "-json", module], {
    encoding: "utf8",
    cwd: os.tmpdir(),
    env: { ...process.env, GOTOOLCHAIN: "local", GOWORK: "off", GOFLAGS: "-mod=mod", ...(mayDownload ? {} : { GOPROXY: "off" }) }
  })
  if (run.error !== undefined) return { reason: `${module} is found through go, which did not run (${run.error.message})` }
  let info: { Dir?: string; Error?: string } = {}
  try {
    info = JSON.parse(run.stdout) as typeof info
  } catch {
    // no JSON: the reason is on stderr
  }
  if (run.status !== 0 || info.Dir === undefined) {
    const why = info.Error ?? (run.stderr.trim().split("\n").at(-1) || `exit ${run.status}`)
    return { reason: `${module} is not in the Go module cache (scripts/whereabouts-plugin.sh puts it there): ${why}` }
  }
  const dir = path.join(info.Dir, "doc/crds")
  const missing = [...CRD_FILES, "daemonset-install.yaml"].filter((f) => !fs.existsSync(path.join(dir, f)))
  return missing.length === 0 ? { path: dir } : { reason: `${dir} lacks ${missing.join(", ")}` }
}

/** The files `kubectl apply -f` installs whereabouts from: its CRDs, then its DaemonSet and RBAC. */
export const upstreamInstallFiles = (crdDir: string): ReadonlyArray<string> => [...CRD_FILES, "daemonset-install.yaml"].map((f) => path.join(crdDir, f))

/** upstream's node-slice controller: the Deployment kube-system/whereabouts-controller (the project's name: ours is whereabouts-gc). */
export const upstreamNodeSliceController = (crdDir: string): string => path.join(crdDir, "node-slice-controller.yaml")

const WA = "whereabouts.cni.cncf.io/v1alpha1"

/** What the plugin and the node-slice controller would have written: a live pod's entry, a gone pod's, named and node-slice pools. */
export const upstreamData = (namespace: string): ReadonlyArray<Record<string, unknown>> => [
  {
    apiVersion: WA,
    kind: "IPPool",
    metadata: { name: "10.10.0.0-16", namespace },
    spec: {
      range: "10.10.0.0/16",
      allocations: {
        "1": { id: "c0ffee01", podref: "default/web-0", ifname: "net1" },
        "2": { id: "c0ffee02", podref: "default/gone-1", ifname: "net1" }
      }
    }
  },
  { apiVersion: WA, kind: "IPPool", metadata: { name: "storage-fd00--64", namespace }, spec: { range: "fd00::/64", allocations: { "5": { id: "c0ffee03", podref: "db/pg-0" } } } },
  { apiVersion: WA, kind: "IPPool", metadata: { name: "node-1-10.30.1.0-24", namespace }, spec: { range: "10.30.1.0/24", allocations: {} } },
  { apiVersion: WA, kind: "OverlappingRangeIPReservation", metadata: { name: "10.10.0.1", namespace }, spec: { podref: "default/web-0", containerid: "c0ffee01", ifname: "net1" } },
  { apiVersion: WA, kind: "OverlappingRangeIPReservation", metadata: { name: "10.10.0.2", namespace }, spec: { podref: "default/gone-1", containerid: "c0ffee02", ifname: "net1" } },
  { apiVersion: WA, kind: "OverlappingRangeIPReservation", metadata: { name: "storage-fd00--5", namespace }, spec: { podref: "db/pg-0", containerid: "c0ffee03" } },
  {
    apiVersion: WA,
    kind: "NodeSlicePool",
    metadata: { name: "slicenet", namespace },
    spec: { range: "10.30.0.0/16", sliceSize: "/24" },
    status: { allocations: [{ nodeName: "node-1", sliceRange: "10.30.1.0/24" }, { nodeName: "", sliceRange: "10.30.2.0/24" }] }
  }
]

/** Everything of whereabouts' that the tests compare: its CRDs, its custom objects and its install's own objects. */
export const WHEREABOUTS_KINDS = [
  "customresourcedefinitions.apiextensions.k8s.io",
  "ippools.whereabouts.cni.cncf.io",
  "overlappingrangeipreservations.whereabouts.cni.cncf.io",
  "nodeslicepools.whereabouts.cni.cncf.io",
  "serviceaccounts",
  "clusterroles.rbac.authorization.k8s.io",
  "clusterrolebindings.rbac.authorization.k8s.io",
  "configmaps",
  "daemonsets.apps",
  "deployments.apps"
] as const

type Obj = Record<string, any>

/** Whether an object is whereabouts': a CRD of its group, one of its objects, or a name of its install. */
export const isWhereabouts = (o: Obj): boolean => {
  const name = String(o["metadata"]?.["name"] ?? "")
  if (o["kind"] === "CustomResourceDefinition") return name.endsWith(".whereabouts.cni.cncf.io")
  if (String(o["apiVersion"]).startsWith("whereabouts.cni.cncf.io/")) return true
  // The node-slice controller's Deployment, by its selector (app: whereabouts-controller).
  return ["whereabouts", "whereabouts-cni", "whereabouts-config"].includes(name) || o["spec"]?.["selector"]?.["matchLabels"]?.["app"] === "whereabouts-controller"
}

/**
 * Whereabouts' objects, keyed kind/namespace/name, each exactly as the API server returns it
 * (spec, status, resourceVersion, generation, labels, annotations, managedFields with their
 * times): any write by anyone changes at least its resourceVersion.
 */
export const snapshotOf = (lists: ReadonlyArray<Obj>): Record<string, Obj> =>
  Object.fromEntries(
    lists
      .flatMap((l) => (l["items"] as Array<Obj>).map((o): Obj => ({ ...o, kind: o["kind"] ?? String(l["kind"]).replace(/List$/, "") })))
      .filter(isWhereabouts)
      .map((o) => [`${o["kind"]}/${o["metadata"]["namespace"] ?? ""}/${o["metadata"]["name"]}`, o])
  )
