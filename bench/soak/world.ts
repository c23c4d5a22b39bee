/**
 * The cluster around the workload: namespaces and NADs, Nodes as the kubelet and the node
 * lifecycle controller write them, the NodeSlicePools upstream's node-slice controller would keep
 * (a slice per node, freed when the node goes), and the controllers' credentials.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { addOffset, cidrAddress, formatIP, parseCidr } from "../../src/domain/ip.ts"
import { KubeApi, type KubeApiShape } from "../../src/services/KubeApi.ts"
import type { KubeError } from "../../src/services/KubeError.ts"
import * as R from "../../src/services/resources.ts"
import { nadObject, namespaceObject, nodeObject } from "../../test/support/objects.ts"
import { applyObjects, installation, serviceAccountToken, shippedRbac, writeTokenKubeconfig } from "../../test/live/support/rbac.ts"
import { nowTime } from "../../test/live/support/node-status.ts"
import type { Credentials } from "../../test/live/support/rest.ts"
import { ignoreExists } from "../lib/world.ts"
import type { History } from "./history.ts"
import { patchStatusAt, persist } from "./kubelet.ts"
import { ALL_NETS, NAMESPACES, type Net, POOLS_NAMESPACE, nadConfig } from "./networks.ts"

const SLICED = ALL_NETS.filter((n) => n.sliceSize !== undefined)
const deadline = () => Date.now() + 120_000

/** The NodeSlicePool of a sliced network is named after its network_name, else the config's name. */
const slicePoolName = (n: Net) => (n.networkName === "" ? n.nad : n.networkName)

const slicesOf = (n: Net): ReadonlyArray<string> => {
  const cidr = parseCidr(String(n.ipam[0]!["range"]))!
  const size = Number(n.sliceSize!.slice(1))
  return Array.from({ length: 2 ** (size - cidr.prefix) }, (_, i) => `${formatIP(addOffset(cidrAddress(cidr), BigInt(i) << BigInt(32 - size))!)}/${size}`)
}

/** Namespaces, NADs and the NodeSlicePools (every slice free). */
export const createNetworks = Effect.gen(function* () {
  const api = yield* KubeApi
  for (const ns of [...NAMESPACES]) yield* ignoreExists(api.create(R.Namespaces, undefined, namespaceObject(ns)))
  for (const n of ALL_NETS) yield* api.create(R.NetworkAttachmentDefinitions, n.namespace, nadObject(n.namespace, n.nad, nadConfig(n)))
  for (const n of SLICED) {
    yield* api.create(R.NodeSlicePools, POOLS_NAMESPACE, {
      apiVersion: "whereabouts.cni.cncf.io/v1alpha1",
      kind: "NodeSlicePool",
      metadata: { name: slicePoolName(n), namespace: POOLS_NAMESPACE },
      spec: { range: n.ipam[0]!["range"], sliceSize: n.sliceSize },
      status: { allocations: slicesOf(n).map((sliceRange) => ({ nodeName: "", sliceRange })) }
    })
  }
})

/** Gives `node` the first free slice of every sliced network (node = undefined frees `from`'s slices). */
const reassign = (from: string, to: string, deadline: number) =>
  Effect.forEach(SLICED, (n) =>
    persist(
      Effect.gen(function* () {
        const api = yield* KubeApi
        const pool = yield* api.get(R.NodeSlicePools, POOLS_NAMESPACE, slicePoolName(n))
        const allocations = [...((pool["status"] as { allocations: Array<{ nodeName: string; sliceRange: string }> }).allocations ?? [])]
        const i = allocations.findIndex((a) => a.nodeName === from)
        if (i < 0) return
        allocations[i] = { ...allocations[i]!, nodeName: to }
        yield* api.replace(R.NodeSlicePools, POOLS_NAMESPACE, { ...pool, status: { allocations } })
      }),
      deadline
    ), { discard: true })

export const makeNodes = (creds: Credentials, history: History) => {
  const note = (node: string, text: string) => history.add([`node ${node}`, "nodes"], `cluster: node ${node} ${text}`)
  const setTaints = (node: string, taints: ReadonlyArray<{ key: string; effect: string }>) =>
    persist(
      Effect.gen(function* () {
        const api = yield* KubeApi
        const current = yield* api.get(R.Nodes, undefined, node)
        yield* api.replace(R.Nodes, undefined, { ...current, spec: { ...(current["spec"] as object), taints } })
      }),
      deadline()
    ).pipe(Effect.catchIf((e) => e.reason === "NotFound", () => Effect.void))
  return {
    /** A Ready node, with a slice of every sliced network. */
    join: (node: string) =>
      Effect.gen(function* () {
        const api = yield* KubeApi
        yield* ignoreExists(persist(api.create(R.Nodes, undefined, nodeObject(node)), deadline()))
        yield* reassign("", node, deadline())
        note(node, "joined (Ready), slices assigned")
      }),
    /** What the node lifecycle controller writes when a kubelet stops reporting. */
    unreachable: (node: string) =>
      Effect.gen(function* () {
        const ready = { type: "Ready", status: "Unknown", reason: "NodeStatusUnknown", message: "Kubelet stopped posting node status.", lastTransitionTime: nowTime() }
        yield* patchStatusAt(creds, `/api/v1/nodes/${node}/status`, { conditions: [ready] }, Number.POSITIVE_INFINITY)
        yield* setTaints(node, [{ key: "node.kubernetes.io/unreachable", effect: "NoExecute" }])
        note(node, "unreachable (Ready Unknown, tainted unreachable:NoExecute)")
      }),
    /** An operator's statement that the node is off. */
    outOfService: (node: string) =>
      Effect.gen(function* () {
        yield* setTaints(node, [
          { key: "node.kubernetes.io/unreachable", effect: "NoExecute" },
          { key: "node.kubernetes.io/out-of-service", effect: "NoExecute" }
        ])
        note(node, "tainted node.kubernetes.io/out-of-service:NoExecute")
      }),
    /** The Node object deleted; its slices go back to the node-slice pools. */
    remove: (node: string) =>
      Effect.gen(function* () {
        const api = yield* KubeApi
        yield* persist(api.delete(R.Nodes, undefined, node), deadline()).pipe(Effect.catchIf((e) => e.reason === "NotFound", () => Effect.void))
        yield* reassign(node, "", deadline())
        note(node, "deleted, its slices freed")
      })
  }
}

export type Nodes = ReturnType<typeof makeNodes>

/** NAD edits and deletions (the network's config changes under pods that use it). */
export const nadOps = (history: History) => {
  const step = (n: Net, what: string, write: (api: KubeApiShape) => Effect.Effect<unknown, KubeError>) =>
    Effect.flatMap(KubeApi, (api) => persist(write(api), deadline())).pipe(Effect.tap(() => history.add(["nads", `nad ${n.key}`], `cluster: NAD ${n.key} ${what}`)))
  const NADS = R.NetworkAttachmentDefinitions
  return {
    edit: (n: Net, variant: number) =>
      step(n, `edited: ${JSON.stringify(n.ipam[variant % n.ipam.length])}`, (api) =>
        Effect.flatMap(api.get(NADS, n.namespace, n.nad), (current) => api.replace(NADS, n.namespace, { ...current, spec: { config: nadConfig(n, variant) } }))
      ),
    remove: (n: Net) => step(n, "deleted", (api) => api.delete(NADS, n.namespace, n.nad)),
    create: (n: Net) => step(n, "created again", (api) => api.create(NADS, n.namespace, nadObject(n.namespace, n.nad, nadConfig(n))))
  }
}

/**
 * deploy/'s ServiceAccount, ClusterRole and Role bound in the pools' namespace, and a kubeconfig
 * with a token of it (valid `hours`) whose server is `server` (the proxy).
 */
export const controllerKubeconfig = (admin: Credentials, server: string, dir: string, hours: number) =>
  Effect.gen(function* () {
    const rbac = installation(shippedRbac(), { namespace: POOLS_NAMESPACE })
    yield* applyObjects(admin, rbac.objects)
    const token = yield* serviceAccountToken(admin, rbac.saNamespace, rbac.serviceAccount, Math.round(hours * 3600))
    fs.mkdirSync(dir, { recursive: true })
    return writeTokenKubeconfig(path.join(dir, "controller.kubeconfig"), { ...admin, server }, rbac.serviceAccount, token)
  })
