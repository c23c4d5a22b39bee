/**
 * Direct access to the harness's etcd (its v3 HTTP/JSON gateway), for what no API client can
 * do: remove objects behind the API server's back while it is down, and compact the history so
 * that no watch can resume from an old resourceVersion.
 *
 * The harness does not export etcd's address; it is read from the etcd process the harness
 * recorded in `harness.json` next to the kubeconfig (test/live/cluster.ts), via its command line.
 */
import * as path from "node:path"
import { harnessProcesses } from "../cluster.ts"

/** `http://127.0.0.1:<port>` of the harness's etcd. */
export const etcdEndpoint = (kubeconfigPath: string): string => {
  const dir = path.dirname(kubeconfigPath)
  for (const { args } of harnessProcesses(dir)) {
    if (!path.basename(args[0] ?? "").startsWith("etcd")) continue
    const url = args.find((a) => a.startsWith("--listen-client-urls="))?.split("=")[1]?.split(",")[0]
    if (url !== undefined) return url
  }
  throw new Error(`no etcd process of the harness found through ${path.join(dir, "harness.json")}`)
}

const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64")

const call = async (endpoint: string, api: string, body: unknown): Promise<Record<string, unknown>> => {
  const res = await fetch(`${endpoint}/v3/${api}`, { method: "POST", body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) })
  const text = await res.text()
  if (!res.ok) throw new Error(`etcd ${api}: HTTP ${res.status}: ${text}`)
  return JSON.parse(text) as Record<string, unknown>
}

/** etcd's current revision. */
export const currentRevision = async (endpoint: string): Promise<string> => {
  const res = await call(endpoint, "kv/range", { key: b64("\0"), count_only: true })
  return String((res["header"] as { revision: string }).revision)
}

/** Deletes one key; resolves with how many keys were deleted. */
export const deleteKey = async (endpoint: string, key: string): Promise<number> => {
  const res = await call(endpoint, "kv/deleterange", { key: b64(key) })
  return Number(res["deleted"] ?? 0)
}

/** Compacts the history up to the current revision: older revisions are gone for every watcher. */
export const compactAll = async (endpoint: string): Promise<string> => {
  const revision = await currentRevision(endpoint)
  await call(endpoint, "kv/compaction", { revision, physical: true })
  return revision
}

/** The kube-apiserver's key of a namespaced core object (default --etcd-prefix=/registry). */
export const podKey = (namespace: string, name: string) => `/registry/pods/${namespace}/${name}`
