/**
 * The upstream whereabouts CNI plugin (the binary scripts/whereabouts-plugin.sh builds) run the way a
 * container runtime runs it — CNI_* environment, the network config on stdin, the CNI result on
 * stdout — and the node around it (kubelet + Multus) played over the live KubeApi, with the same
 * shape as the simulation's startPod/deletePod in cni-plugin.ts, so a scenario reads the same with
 * either allocator.
 *
 * The plugin refuses to run without a flat file; the one written here names a kubeconfig whose
 * context namespace is where the plugin keeps its IPPools, reservations and per-ADD Lease (it has
 * no other setting for that namespace; kube-system when the context names none).
 */
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Data, Effect, Layer } from "effect"
import { parse as parseYaml, stringify as stringifyYaml } from "yaml"
import type { Attachment, CniRequest, RunningPod } from "../../../src/testing/cni-plugin.ts"
import { isRecord, record } from "../../../src/domain/json.ts"
import { NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION } from "../../../src/domain/multus.ts"
import { KubeApi, type KubeObject } from "../../../src/services/KubeApi.ts"
import * as R from "../../../src/services/resources.ts"

export class UpstreamPluginError extends Data.TaggedError("UpstreamPluginError")<{
  readonly command: "ADD" | "DEL"
  /** The CNI error's `msg` (and `details`), or why the process did not answer. */
  readonly message: string
  readonly stderr: string
}> {}

/** One node's plugin setup: the binary, and the temp dir with its flat file and kubeconfig. */
export interface PluginNodeShape {
  readonly binary: string
  readonly dir: string
  /** The pools' namespace (the kubeconfig context's namespace). */
  readonly namespace: string
  readonly flatFile: string
  /** `NODENAME` for the plugin (node-slice pools); unset when undefined. */
  readonly nodeName: string | undefined
  /** IPAM settings this node gives every config, under the NAD's own (e.g. `leader_retry_period`). */
  readonly ipamDefaults: Readonly<Record<string, unknown>>
}

export class PluginNode extends Context.Tag("test/live/PluginNode")<PluginNode, PluginNodeShape>() {}

/**
 * A node's plugin files in a new temp dir: `whereabouts.kubeconfig`, the admin kubeconfig with its
 * context's namespace set to `namespace`, and `whereabouts.conf` naming it. The caller removes
 * `dir` (pluginNode does it with its scope).
 */
export interface PluginNodeOptions {
  readonly binary: string
  readonly kubeconfig: string
  readonly namespace: string
  readonly nodeName?: string
  readonly ipamDefaults?: Readonly<Record<string, unknown>>
}

export const writePluginNode = (options: PluginNodeOptions): PluginNodeShape => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "whereabouts-plugin-"))
  const kc = parseYaml(fs.readFileSync(options.kubeconfig, "utf8")) as {
    "current-context": string
    contexts: Array<{ name: string; context: Record<string, unknown> }>
  }
  const current = kc.contexts.find((c) => c.name === kc["current-context"])
  if (current === undefined) throw new Error(`${options.kubeconfig}: no context ${kc["current-context"]}`)
  current.context["namespace"] = options.namespace
  const kubeconfig = path.join(dir, "whereabouts.kubeconfig")
  fs.writeFileSync(kubeconfig, stringifyYaml(kc), { mode: 0o600 })
  const flatFile = path.join(dir, "whereabouts.conf")
  fs.writeFileSync(flatFile, JSON.stringify({ kubernetes: { kubeconfig } }))
  return { binary: options.binary, dir, namespace: options.namespace, flatFile, nodeName: options.nodeName, ipamDefaults: options.ipamDefaults ?? {} }
}

/** writePluginNode as a layer: the temp dir is removed with the scope. */
export const pluginNode = (options: PluginNodeOptions) =>
  Layer.scoped(
    PluginNode,
    Effect.acquireRelease(
      Effect.sync(() => writePluginNode(options)),
      (node) => Effect.sync(() => fs.rmSync(node.dir, { recursive: true, force: true }))
    )
  )

/**
 * What the plugin reads on stdin for a NAD's `spec.config`: a single plugin config as is; from a
 * config list, the plugin whose IPAM is whereabouts, with the list's `cniVersion` and `name` (as
 * libcni builds each plugin's config). The IPAM object gets `configuration_path` pointing at the
 * node's flat file (a real node has it at one of the default paths, which tests cannot write), and
 * the node's `ipamDefaults` under the keys the NAD sets itself.
 */
export const pluginStdin = (specConfig: string, flatFile: string, ipamDefaults: Readonly<Record<string, unknown>> = {}): string => {
  const parsed: unknown = JSON.parse(specConfig)
  if (!isRecord(parsed)) throw new Error(`not a CNI config object: ${specConfig}`)
  const plugins = parsed["plugins"]
  let conf: Record<string, unknown>
  if (Array.isArray(plugins)) {
    const found = plugins.find((p): p is Record<string, unknown> => isRecord(p) && isRecord(p["ipam"]) && p["ipam"]["type"] === "whereabouts")
    if (found === undefined) throw new Error(`no whereabouts plugin in the config list: ${specConfig}`)
    conf = { ...found, cniVersion: parsed["cniVersion"], name: parsed["name"] }
  } else conf = parsed
  const ipam = record(conf["ipam"])
  return JSON.stringify({ ...conf, ipam: { ...ipamDefaults, ...ipam, configuration_path: flatFile } })
}

const tail = (text: string, lines = 15) => text.trimEnd().split("\n").slice(-lines).join("\n")

interface Exit {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const PLUGIN_TIMEOUT_MS = 60_000

const exec = (binary: string, env: NodeJS.ProcessEnv, stdin: string): Effect.Effect<Exit> =>
  Effect.async<Exit>((resume) => {
    const child = spawn(binary, [], { env, stdio: ["pipe", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c))
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c))
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${PLUGIN_TIMEOUT_MS / 1000} s)`
      child.kill("SIGKILL")
    }, PLUGIN_TIMEOUT_MS)
    child.once("error", (e) => {
      clearTimeout(timer)
      resume(Effect.succeed({ code: null, stdout, stderr: `${stderr}\n${e.message}` }))
    })
    child.once("close", (code) => {
      clearTimeout(timer)
      resume(Effect.succeed({ code, stdout, stderr }))
    })
    child.stdin.on("error", () => undefined)
    child.stdin.end(stdin)
    return Effect.sync(() => {
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })

/** The request of cni-plugin.ts, plus what a runtime knows besides: the pod's uid. */
export interface PluginRequest extends CniRequest {
  readonly podUid?: string
}

const invoke = (command: "ADD" | "DEL", req: PluginRequest) =>
  Effect.gen(function* () {
    const node = yield* PluginNode
    const args = [
      "IgnoreUnknown=1",
      `K8S_POD_NAMESPACE=${req.podNamespace}`,
      `K8S_POD_NAME=${req.podName}`,
      `K8S_POD_INFRA_CONTAINER_ID=${req.containerId}`,
      ...(req.podUid === undefined ? [] : [`K8S_POD_UID=${req.podUid}`])
    ].join(";")
    // Only what a runtime passes: the plugin must not pick up this process's proxies or NODENAME.
    const env: NodeJS.ProcessEnv = {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      CNI_COMMAND: command,
      CNI_CONTAINERID: req.containerId,
      CNI_NETNS: `/var/run/netns/cni-${req.containerId.slice(0, 12)}`,
      CNI_IFNAME: req.ifname,
      CNI_PATH: path.dirname(node.binary),
      CNI_ARGS: args,
      ...(node.nodeName === undefined ? {} : { NODENAME: node.nodeName })
    }
    const stdin = yield* Effect.try({ try: () => pluginStdin(req.config, node.flatFile, node.ipamDefaults), catch: (e) => new UpstreamPluginError({ command, message: String(e), stderr: "" }) })
    const out = yield* exec(node.binary, env, stdin)
    if (out.code === 0) return out.stdout
    // A failing plugin prints a CNI error object on stdout.
    let message = `exit ${out.code}: ${out.stdout.trim()}`
    try {
      const e = JSON.parse(out.stdout) as { msg?: string; details?: string }
      message = [e.msg, e.details].filter((s) => s !== undefined && s !== "").join(": ")
    } catch {
      // not JSON: keep the raw text
    }
    return yield* new UpstreamPluginError({ command, message: `whereabouts ${command} ${req.podNamespace}/${req.podName} ${req.ifname}: ${message}`, stderr: tail(out.stderr) })
  })

/** CNI ADD through the real plugin; the addresses of its result (`ips[].address`, prefix dropped), in order. */
export const pluginAdd = (req: PluginRequest) =>
  Effect.flatMap(invoke("ADD", req), (stdout) =>
    Effect.try({
      try: () => {
        const result = JSON.parse(stdout) as { ips?: Array<{ address?: unknown }> }
        return (result.ips ?? []).map((ip) => {
          if (typeof ip.address !== "string" || !ip.address.includes("/")) throw new Error(`no address in ${JSON.stringify(ip)}`)
          return ip.address.slice(0, ip.address.indexOf("/"))
        })
      },
      catch: (e) => new UpstreamPluginError({ command: "ADD", message: `unreadable CNI result (${String(e)}): ${stdout}`, stderr: "" })
    })
  )

/** CNI DEL through the real plugin (it succeeds when nothing matched). */
export const pluginDel = (req: PluginRequest) => Effect.asVoid(invoke("DEL", req))

// ---------------------------------------------------------------------------------------------
// The node: kubelet + Multus around the plugin

const nadConfig = (namespace: string, name: string) =>
  Effect.flatMap(KubeApi, (api) => api.get(R.NetworkAttachmentDefinitions, namespace, name)).pipe(
    Effect.map((nad: KubeObject) => String((nad["spec"] as { config?: unknown } | undefined)?.config ?? ""))
  )

/** 64 hex digits, like a CRI sandbox id. */
export const newContainerId = (): string => randomUUID().replaceAll("-", "") + randomUUID().replaceAll("-", "")

const mac = (i: number) => `02:42:ac:11:00:${(i + 2).toString(16).padStart(2, "0")}`

/** Multus's network-status: the cluster network first, then one entry per attachment with the plugin's IPs. */
export const networkStatusOf = (ips: RunningPod["ips"]): string =>
  JSON.stringify([
    { name: "cluster-network", interface: "eth0", ips: ["10.244.0.10"], mac: mac(0), default: true, dns: {} },
    ...ips.map((i, n) => ({ name: i.network, interface: i.ifname, ips: i.ips, mac: mac(n + 1), dns: {} }))
  ])

/** ADD through the real plugin for every attachment of one sandbox, in order, as Multus delegates. */
export const addAttachments = (pod: { readonly namespace: string; readonly name: string; readonly uid: string }, containerId: string, attachments: ReadonlyArray<Attachment>) =>
  Effect.forEach(attachments, (a) =>
    Effect.gen(function* () {
      const config = yield* nadConfig(a.nad.namespace, a.nad.name)
      const ips = yield* pluginAdd({ podNamespace: pod.namespace, podName: pod.name, podUid: pod.uid, containerId, ifname: a.ifname, config })
      return { network: `${a.nad.namespace}/${a.nad.name}`, ifname: a.ifname, ips }
    })
  )

/**
 * What a node does for a new pod, with the real plugin: create the pod (its `networks` annotation
 * names the attachments), run ADD per attachment, then write Multus's network-status.
 */
export const startPod = (namespace: string, name: string, attachments: ReadonlyArray<Attachment>, nodeName = "node-1") =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const networks = attachments.map((a) => `${a.nad.namespace}/${a.nad.name}@${a.ifname}`).join(",")
    const pod = yield* api.create(R.Pods, namespace, {
      metadata: { name, namespace, annotations: { [NETWORKS_ANNOTATION]: networks } },
      spec: { nodeName, containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }] }
    })
    const uid = pod.metadata.uid ?? ""
    const containerId = newContainerId()
    const ips = yield* addAttachments({ namespace, name, uid }, containerId, attachments)
    yield* api.patch(R.Pods, namespace, name, { type: "merge", body: { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: networkStatusOf(ips) } } } })
    return { namespace, name, uid, containerId, ips } satisfies RunningPod
  })

/**
 * The kubelet retrying a pod's sandbox after a failed ADD: a new container id, the plugin again for
 * each attachment, then Multus's network-status.
 */
export const retrySandbox = (namespace: string, name: string, attachments: ReadonlyArray<Attachment>) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const uid = (yield* api.get(R.Pods, namespace, name)).metadata.uid ?? ""
    const containerId = newContainerId()
    const ips = yield* addAttachments({ namespace, name, uid }, containerId, attachments)
    yield* api.patch(R.Pods, namespace, name, { type: "merge", body: { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: networkStatusOf(ips) } } } })
    return { namespace, name, uid, containerId, ips } satisfies RunningPod
  })

/**
 * Deletes a pod with grace 0. With `cniDel` the node runs the plugin's DEL first, attachments in
 * reverse order as Multus does; without it the allocation leaks (a node crash, a force deletion).
 */
export const deletePod = (pod: RunningPod, options: { readonly cniDel?: boolean } = {}) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    if (options.cniDel === true) {
      for (const i of [...pod.ips].reverse()) {
        const [ns, nadName] = i.network.split("/") as [string, string]
        const config = yield* nadConfig(ns, nadName)
        yield* pluginDel({ podNamespace: pod.namespace, podName: pod.name, podUid: pod.uid, containerId: pod.containerId, ifname: i.ifname, config })
      }
    }
    yield* api.delete(R.Pods, pod.namespace, pod.name, { gracePeriodSeconds: 0 })
  })

/**
 * A StatefulSet `name-0..name-(n-1)` over the real plugin: scale up creates the missing ordinals in
 * order, scale down deletes from the highest (no CNI DEL).
 */
export const statefulSet = (name: string, attachments: ReadonlyArray<Attachment>, namespace: string) => {
  const pods: Array<RunningPod> = []
  return {
    pods: (): ReadonlyArray<RunningPod> => pods,
    scaleTo: (n: number) =>
      Effect.gen(function* () {
        while (pods.length < n) pods.push(yield* startPod(namespace, `${name}-${pods.length}`, attachments))
        while (pods.length > n) yield* deletePod(pods.pop()!)
      })
  }
}
