/**
 * A small real cluster for a live test file: Kubernetes' own controllers and scheduler
 * (controlplane.ts) next to the tier's API server, node agents (node-agent.ts) with the real
 * whereabouts plugin, and the workload objects the tests hand to them — StatefulSets, Deployments,
 * Jobs — through the apps and batch APIs. Pods never name a node: the scheduler binds them.
 *
 * The agents' Nodes carry a zone of their own and a label the workloads select, so Nodes other
 * files left in the shared API server neither take these pods nor count in the node lifecycle
 * controller's view of this zone (a zone with over 55% of its nodes unhealthy gets no evictions).
 */
import { Duration, Effect, type Scope } from "effect"
import { NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION } from "../../../src/domain/multus.ts"
import type { KubeApi } from "../../../src/services/KubeApi.ts"
import { type KubeControllers, startKubeControllers } from "./controlplane.ts"
import { AGENT_EXIT_CODE, AGENT_RUNS_FOR, type NodeAgent, startNodeAgent } from "./node-agent.ts"
import { type Credentials, credentialsOf, rest, restOk } from "./rest.ts"
import { waitUntil } from "./world.ts"

export interface KubernetesOptions {
  /** kube-controller-manager and kube-scheduler (scripts/controlplane-assets.sh). */
  readonly controllers: string
  /** The API server's dir (its certs) and an admin kubeconfig of it. */
  readonly planeDir: string
  readonly kubeconfig: string
  readonly plugin: string
  readonly poolsNamespace: string
  /** Node names; each gets an agent. */
  readonly nodes: ReadonlyArray<string>
  readonly teardown: "del" | "leak"
  /** Node labels; the workloads of `podTemplate` select them. Also sets the zone. */
  readonly nodeLabels?: Readonly<Record<string, string>>
  /** Plugin processes at once across the agents (default 2: two cores). */
  readonly pluginSlots?: number
}

export interface Kubernetes {
  readonly controllers: KubeControllers
  readonly agents: ReadonlyArray<NodeAgent>
  readonly agent: (name: string) => NodeAgent
  readonly admin: Credentials
  /** The agents' histories and the controllers' log tails, for failure messages. */
  readonly context: () => string
}

/** Controllers, scheduler and agents, stopped (and the Nodes deleted) when the scope closes. */
export const startKubernetes = (options: KubernetesOptions): Effect.Effect<Kubernetes, Error, KubeApi | Scope.Scope> =>
  Effect.gen(function* () {
    const controllers = yield* startKubeControllers({ assets: options.controllers, planeDir: options.planeDir, kubeconfig: options.kubeconfig })
    const slots = yield* Effect.makeSemaphore(options.pluginSlots ?? 2)
    const agents = yield* Effect.forEach(options.nodes, (name) =>
      startNodeAgent({
        name,
        labels: options.nodeLabels ?? {},
        plugin: options.plugin,
        kubeconfig: options.kubeconfig,
        poolsNamespace: options.poolsNamespace,
        teardown: options.teardown,
        pluginSlots: slots
      })
    )
    const agent = (name: string) => {
      const found = agents.find((a) => a.name === name)
      if (found === undefined) throw new Error(`no node agent ${name}`)
      return found
    }
    const context = () => [controllers.logTail(15), ...agents.map((a) => `--- agent ${a.name}${a.alive() ? "" : " (dead)"}\n${a.history(25)}`)].join("\n")
    return { controllers, agents, agent, admin: credentialsOf(options.kubeconfig), context } satisfies Kubernetes
  })

// ---------------------------------------------------------------------------------------------
// Workloads

export interface PodTemplateOptions {
  /** Pod labels (the workload's selector). */
  readonly labels: Readonly<Record<string, string>>
  /** The `networks` annotation, as written. */
  readonly networks: string
  /** Node labels the pods must land on (the agents'). */
  readonly nodeSelector: Readonly<Record<string, string>>
  readonly graceSeconds?: number
  /**
   * How long the pods stay on an unreachable or not-ready node before the taint manager evicts
   * them; "forever" tolerates it (no eviction). Default: the API server's 300 s.
   */
  readonly tolerateUnreachable?: number | "forever"
  /** At most one of these pods per node (a required anti-affinity on the hostname). */
  readonly onePerNode?: boolean
  /** The pod ends on its own with this exit code after `runsForSeconds` (a Job's). */
  readonly exitCode?: number
  readonly runsForSeconds?: number
}

export const podTemplate = (o: PodTemplateOptions) => {
  const annotations: Record<string, string> = { [NETWORKS_ANNOTATION]: o.networks }
  if (o.exitCode !== undefined) annotations[AGENT_EXIT_CODE] = String(o.exitCode)
  if (o.runsForSeconds !== undefined) annotations[AGENT_RUNS_FOR] = String(o.runsForSeconds)
  const tolerate = o.tolerateUnreachable
  const tolerations =
    tolerate === undefined
      ? []
      : ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"].map((key) => ({
          key,
          operator: "Exists",
          effect: "NoExecute",
          ...(tolerate === "forever" ? {} : { tolerationSeconds: tolerate })
        }))
  return {
    metadata: { labels: o.labels, annotations },
    spec: {
      nodeSelector: o.nodeSelector,
      ...(o.onePerNode === true
        ? { affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: o.labels }, topologyKey: "kubernetes.io/hostname" }] } } }
        : {}),
      terminationGracePeriodSeconds: o.graceSeconds ?? 5,
      ...(o.exitCode === undefined ? {} : { restartPolicy: "Never" }),
      tolerations,
      containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }]
    }
  }
}

type Template = ReturnType<typeof podTemplate>

export const statefulSetObject = (name: string, replicas: number, template: Template, policy: "OrderedReady" | "Parallel" = "Parallel") => ({
  apiVersion: "apps/v1",
  kind: "StatefulSet" as const,
  metadata: { name },
  spec: { replicas, serviceName: name, podManagementPolicy: policy, selector: { matchLabels: template.metadata.labels }, template }
})

export const deploymentObject = (name: string, replicas: number, template: Template) => ({
  apiVersion: "apps/v1",
  kind: "Deployment" as const,
  metadata: { name },
  spec: { replicas, selector: { matchLabels: template.metadata.labels }, strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } }, template }
})

export const jobObject = (name: string, template: Template, options: { readonly completions?: number; readonly backoffLimit?: number } = {}) => ({
  apiVersion: "batch/v1",
  kind: "Job" as const,
  metadata: { name },
  spec: { completions: options.completions ?? 1, parallelism: options.completions ?? 1, backoffLimit: options.backoffLimit ?? 0, template }
})

const plural = { StatefulSet: "statefulsets", Deployment: "deployments", Job: "jobs", ReplicaSet: "replicasets" } as const
export type WorkloadKind = keyof typeof plural
const groupOf = (kind: WorkloadKind) => (kind === "Job" ? "batch/v1" : "apps/v1")
export const workloadPath = (kind: WorkloadKind, namespace: string, name?: string) =>
  `/apis/${groupOf(kind)}/namespaces/${namespace}/${plural[kind]}${name === undefined ? "" : `/${name}`}`

export const createWorkload = (admin: Credentials, namespace: string, object: { readonly kind: WorkloadKind; readonly metadata: { readonly name: string } }) =>
  restOk(admin, "POST", workloadPath(object.kind, namespace), { ...object, metadata: { ...object.metadata, namespace } }, [201])

export const patchWorkload = (admin: Credentials, kind: WorkloadKind, namespace: string, name: string, patch: unknown) =>
  restOk(admin, "PATCH", workloadPath(kind, namespace, name), patch, [200], "application/merge-patch+json")

export const scale = (admin: Credentials, kind: WorkloadKind, namespace: string, name: string, replicas: number) =>
  patchWorkload(admin, kind, namespace, name, { spec: { replicas } })

export const readWorkload = (admin: Credentials, kind: WorkloadKind, namespace: string, name: string) => restOk(admin, "GET", workloadPath(kind, namespace, name), undefined, [200])

/** Waits until the workload's status says `replicas` ready (and, for a Deployment, all updated). */
export const awaitReady = (admin: Credentials, kind: "StatefulSet" | "Deployment", namespace: string, name: string, replicas: number, context: () => string, timeout: Duration.DurationInput = "60 seconds") =>
  waitUntil(
    `${kind} ${name} has ${replicas} ready`,
    Effect.map(readWorkload(admin, kind, namespace, name), (o) => {
      const s = (o["status"] ?? {}) as { readyReplicas?: number; updatedReplicas?: number; replicas?: number; availableReplicas?: number }
      return { ready: s.readyReplicas ?? 0, updated: s.updatedReplicas ?? 0, replicas: s.replicas ?? 0 }
    }),
    (s) => s.ready === replicas && s.replicas === replicas && (kind !== "Deployment" || s.updated === replicas),
    { context, timeout }
  )

/** Deletes a workload with foreground propagation and waits until it and the pods it selected are gone. */
export const deleteWorkload = (admin: Credentials, kind: WorkloadKind, namespace: string, name: string, selector: string, context: () => string) =>
  Effect.gen(function* () {
    yield* restOk(admin, "DELETE", `${workloadPath(kind, namespace, name)}?propagationPolicy=Foreground`, undefined, [200, 202, 404])
    yield* waitUntil(
      `${kind} ${name} and its pods gone`,
      Effect.zip(
        Effect.promise(() => rest(admin, "GET", workloadPath(kind, namespace, name))),
        Effect.suspend(() => podsOf(admin, namespace, selector))
      ),
      ([r, pods]) => r.status === 404 && pods.length === 0,
      { context, timeout: "60 seconds" }
    )
  })

/** The secondary addresses a network-status lists (none when it is missing or unreadable). */
const statusIPs = (text: string | undefined): ReadonlyArray<string> => {
  try {
    const entries = JSON.parse(text ?? "[]") as Array<{ default?: boolean; ips?: Array<string> }>
    return entries.filter((e) => e.default !== true).flatMap((e) => e.ips ?? [])
  } catch {
    return []
  }
}

/** The pods of a namespace as the API server has them: name, uid, node, phase, terminating, the DisruptionTarget reason, the addresses Multus listed. */
export const podsOf = (admin: Credentials, namespace: string, selector?: string) =>
  Effect.map(
    restOk(admin, "GET", `/api/v1/namespaces/${namespace}/pods${selector === undefined ? "" : `?labelSelector=${encodeURIComponent(selector)}`}`, undefined, [200]),
    (list) =>
      ((list["items"] ?? []) as Array<{
        metadata: { name: string; uid: string; deletionTimestamp?: string; annotations?: Record<string, string> }
        spec: { nodeName?: string }
        status?: { phase?: string; conditions?: Array<{ type: string; reason?: string }> }
      }>).map((p) => ({
        name: p.metadata.name,
        uid: p.metadata.uid,
        node: p.spec.nodeName ?? "",
        phase: p.status?.phase ?? "",
        terminating: p.metadata.deletionTimestamp !== undefined,
        disruption: p.status?.conditions?.find((c) => c.type === "DisruptionTarget")?.reason,
        ips: statusIPs(p.metadata.annotations?.[NETWORK_STATUS_ANNOTATION])
      }))
  )

export type PodSeen = Effect.Effect.Success<ReturnType<typeof podsOf>>[number]

export const TEST_TIMEOUT = Duration.toMillis("4 minutes")

/** The status of a Node's Ready condition ("True", "False", "Unknown"; "" without one, "gone" without the Node). */
export const nodeReady = (admin: Credentials, name: string) =>
  Effect.map(Effect.promise(() => rest(admin, "GET", `/api/v1/nodes/${name}`)), (r) => {
    if (r.status === 404) return "gone"
    const node = JSON.parse(r.body) as { status?: { conditions?: Array<{ type: string; status: string }> } }
    return node.status?.conditions?.find((c) => c.type === "Ready")?.status ?? ""
  })

type Taint = { readonly key: string; readonly value?: string; readonly effect: string }

/** Rewrites a Node's taints, guarded by its resourceVersion (the node lifecycle controller writes them too), retried on a conflict. */
const editTaints = (admin: Credentials, name: string, edit: (taints: ReadonlyArray<Taint>) => ReadonlyArray<Taint>) =>
  Effect.retry(
    Effect.gen(function* () {
      const node = yield* restOk(admin, "GET", `/api/v1/nodes/${name}`, undefined, [200])
      const taints = edit(((node["spec"] as { taints?: ReadonlyArray<Taint> } | undefined)?.taints ?? []) as ReadonlyArray<Taint>)
      const resourceVersion = (node["metadata"] as { resourceVersion: string }).resourceVersion
      yield* restOk(admin, "PATCH", `/api/v1/nodes/${name}`, { metadata: { resourceVersion }, spec: { taints } }, [200], "application/merge-patch+json")
    }),
    { times: 5 }
  )

/** Adds a taint to a Node, as an operator does with `kubectl taint`. */
export const taintNode = (admin: Credentials, name: string, taint: Taint) => editTaints(admin, name, (taints) => [...taints, taint])

/** Removes every taint with `key` from a Node. */
export const untaintNode = (admin: Credentials, name: string, key: string) => editTaints(admin, name, (taints) => taints.filter((t) => t.key !== key))
