/**
 * The kubelet's side of a Node as the control plane sees it: the Node object registered with room
 * for pods, its Ready condition posted through `nodes/status`, and its Lease in `kube-node-lease`
 * renewed — what the scheduler needs to bind pods to it and what the node lifecycle controller
 * watches to call it healthy. A node that stops doing this turns Unknown after the
 * controller-manager's grace period, gets the unreachable taints, and its pods are evicted.
 */
import { Effect } from "effect"
import { type Credentials, rest } from "./rest.ts"

const LEASE_NAMESPACE = "kube-node-lease"
/** What a kubelet asks for its Lease (its default --node-lease-duration-seconds). */
const LEASE_SECONDS = 40
const STRATEGIC = "application/strategic-merge-patch+json"
const MERGE = "application/merge-patch+json"

/** RFC 3339 in seconds, as the API server writes times. */
export const nowTime = (): string => new Date().toISOString().replace(/\.\d+Z$/, "Z")
/** A MicroTime (six fractional digits), as a Lease's renewTime must be written. */
const microTime = (): string => new Date().toISOString().replace(/\.(\d{3})Z$/, ".$1000Z")

const fail = (what: string, res: { readonly status: number; readonly body: string }) => new Error(`${what}: HTTP ${res.status}: ${res.body.slice(0, 300)}`)

const call = (creds: Credentials, method: string, urlPath: string, body?: unknown, contentType?: string) =>
  Effect.tryPromise({ try: () => rest(creds, method, urlPath, body, contentType), catch: (e) => (e instanceof Error ? e : new Error(String(e))) })

const capacity = { cpu: "16", memory: "64Gi", pods: "110", "ephemeral-storage": "100Gi" }

const conditions = (readySince: string) => {
  const now = nowTime()
  const quiet = (type: string, reason: string) => ({ type, status: "False", reason, message: `kubelet has no ${type}`, lastHeartbeatTime: now, lastTransitionTime: readySince })
  return [
    quiet("MemoryPressure", "KubeletHasSufficientMemory"),
    quiet("DiskPressure", "KubeletHasNoDiskPressure"),
    quiet("PIDPressure", "KubeletHasSufficientPID"),
    { type: "Ready", status: "True", reason: "KubeletReady", message: "kubelet is posting ready status", lastHeartbeatTime: now, lastTransitionTime: readySince }
  ]
}

/** Creates the Node (or takes over one of that name), then posts its status; returns its uid. */
export const registerNode = (creds: Credentials, name: string, labels: Readonly<Record<string, string>>, readySince: string) =>
  Effect.gen(function* () {
    const metadata = { name, labels: { "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", ...labels } }
    const created = yield* call(creds, "POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata, spec: {} })
    if (created.status === 409) {
      const patched = yield* call(creds, "PATCH", `/api/v1/nodes/${name}`, { metadata: { labels: metadata.labels }, spec: { taints: null } }, MERGE)
      if (patched.status !== 200) return yield* Effect.fail(fail(`taking over Node ${name}`, patched))
    } else if (created.status !== 201) return yield* Effect.fail(fail(`creating Node ${name}`, created))
    const status = {
      capacity,
      allocatable: capacity,
      conditions: conditions(readySince),
      addresses: [{ type: "InternalIP", address: "127.0.0.1" }, { type: "Hostname", address: name }],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: name,
        systemUUID: name,
        bootID: name,
        kernelVersion: "6.1.0",
        osImage: "node agent of the whereabouts-controller live tier",
        containerRuntimeVersion: "containerd://2.0.0",
        kubeletVersion: "v1.37.2",
        kubeProxyVersion: "",
        operatingSystem: "linux",
        architecture: "amd64"
      }
    }
    const posted = yield* call(creds, "PATCH", `/api/v1/nodes/${name}/status`, { status }, STRATEGIC)
    if (posted.status !== 200) return yield* Effect.fail(fail(`posting the status of Node ${name}`, posted))
    return String((JSON.parse(posted.body) as { metadata?: { uid?: string } }).metadata?.uid ?? "")
  })

/**
 * One heartbeat: the Ready condition's lastHeartbeatTime through `nodes/status` and the Lease's
 * renewTime (created, owned by the Node, when missing). "gone" when the Node no longer exists: a
 * kubelet then registers it again.
 */
export const heartbeat = (creds: Credentials, name: string, nodeUid: string, readySince: string) =>
  Effect.gen(function* () {
    const status = yield* call(creds, "PATCH", `/api/v1/nodes/${name}/status`, { status: { conditions: conditions(readySince) } }, STRATEGIC)
    if (status.status === 404) return "gone" as const
    if (status.status !== 200) return yield* Effect.fail(fail(`heartbeat of Node ${name}`, status))
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${LEASE_NAMESPACE}/leases/${name}`
    const renewed = yield* call(creds, "PATCH", leasePath, { spec: { holderIdentity: name, leaseDurationSeconds: LEASE_SECONDS, renewTime: microTime() } }, MERGE)
    if (renewed.status === 404) {
      const lease = {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name, namespace: LEASE_NAMESPACE, ownerReferences: [{ apiVersion: "v1", kind: "Node", name, uid: nodeUid }] },
        spec: { holderIdentity: name, leaseDurationSeconds: LEASE_SECONDS, renewTime: microTime() }
      }
      const created = yield* call(creds, "POST", `/apis/coordination.k8s.io/v1/namespaces/${LEASE_NAMESPACE}/leases`, lease)
      if (created.status !== 201 && created.status !== 409) return yield* Effect.fail(fail(`creating the Lease of Node ${name}`, created))
    } else if (renewed.status !== 200) return yield* Effect.fail(fail(`renewing the Lease of Node ${name}`, renewed))
    return "renewed" as const
  })

/** Deletes the Node (its Lease goes with it: the garbage collector follows the owner reference). */
export const deleteNode = (creds: Credentials, name: string) => Effect.asVoid(call(creds, "DELETE", `/api/v1/nodes/${name}`))
