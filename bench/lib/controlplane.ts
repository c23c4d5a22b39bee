/**
 * A real kube-apiserver + etcd started through the live tier's harness (test/live/cluster.ts) with
 * deploy/'s CRDs, the benchmark's own unlimited access to it, and what /proc says of processes.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Cause, Duration, Effect, Layer, Logger, LogLevel, type Scope } from "effect"
import { layerWith } from "../../src/services/ControllerConfig.ts"
import type { KubeApi } from "../../src/services/KubeApi.ts"
import { layerLive } from "../../src/services/KubeApiLive.ts"
import { type ControlPlane, DIR_PREFIX, adminRequest, harnessProcesses, installCrds, reapOrphans, scriptAsset, startControlPlane } from "../../test/live/cluster.ts"
import { parseProm, type Sample } from "./prom.ts"

export interface BenchPlane extends ControlPlane {
  readonly assets: string
  readonly version: string
  /** Raw `/metrics` text of the apiserver. */
  readonly metrics: () => Promise<string>
}

/** Starts etcd + kube-apiserver on loopback and installs the project's CRDs; `etcdQuotaBytes`: etcd's --quota-backend-bytes. */
export const startBenchPlane = async (options: { readonly etcdQuotaBytes?: number } = {}): Promise<BenchPlane> => {
  // The assets dir (kube-apiserver, etcd); may build them (minutes, once) when not cached.
  const assets = await scriptAsset("envtest-assets.sh", true)
  reapOrphans()
  // etcd takes every flag from an ETCD_<FLAG> variable too, and the harness starts it with this
  // process's environment: set for the start only, so the harness' flags stay the test tier's.
  const quotaVar = "ETCD_QUOTA_BACKEND_BYTES"
  const before = process.env[quotaVar]
  if (options.etcdQuotaBytes !== undefined) process.env[quotaVar] = String(options.etcdQuotaBytes)
  const plane = await startControlPlane(fs.mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX)), assets).finally(() => {
    if (before === undefined) delete process.env[quotaVar]
    else process.env[quotaVar] = before
  })
  try {
    await installCrds(plane)
    const v = await adminRequest(plane, "GET", "/version")
    const version = (JSON.parse(v.body) as { gitVersion?: string }).gitVersion ?? "unknown"
    const metrics = async () => {
      const res = await adminRequest(plane, "GET", "/metrics")
      if (res.status !== 200) throw new Error(`apiserver /metrics: HTTP ${res.status}`)
      return res.body
    }
    return { ...plane, assets, version, metrics }
  } catch (e) {
    await plane.stop()
    throw e
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc; NaN for none or one that is gone. */
export const cpuSeconds = (pid: number | undefined): number => {
  if (pid === undefined) return Number.NaN
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return Number.NaN
  }
}

/** VmRSS and VmHWM of a process in bytes, from /proc (throws once it is gone). */
export const procMemory = (pid: number): { readonly rss: number; readonly hwm: number } => {
  const text = fs.readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? Number.NaN) * 1024
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") }
}

/** VmRSS in bytes; NaN for no process or one that is gone. */
export const rssOf = (pid: number | undefined): number => {
  try {
    return pid === undefined ? Number.NaN : procMemory(pid).rss
  } catch {
    return Number.NaN
  }
}

/** The pids of the plane's kube-apiserver and etcd (from the harness' state file and /proc). */
export const planePids = (plane: ControlPlane): { readonly apiserver: number | undefined; readonly etcd: number | undefined } => {
  const running = harnessProcesses(plane.dir)
  const named = (word: string) => (p: (typeof running)[number]) => p.args.some((a) => a.includes(word))
  return { apiserver: running.findLast(named("kube-apiserver"))?.pid, etcd: running.findLast((p) => !named("kube-apiserver")(p) && named("etcd")(p))?.pid }
}

/** `etcd --version`'s first line's version. */
export const etcdVersion = (assets: string): string => {
  try {
    const out = execFileSync(path.join(assets, "etcd"), ["--version"], { encoding: "utf8" })
    return /etcd Version: (\S+)/.exec(out)?.[1] ?? out.split("\n")[0] ?? "?"
  } catch {
    return "?"
  }
}

/** KubeApi for the benchmark driver: admin kubeconfig, no rate limit. */
export const driverLayer = (plane: BenchPlane): Layer.Layer<KubeApi> =>
  layerLive.pipe(
    Layer.provide(layerWith({ kubeconfig: plane.kubeconfigPath, apiQps: 0, requestTimeout: Duration.seconds(120) })),
    Layer.orDie,
    // The benchmark's own informers (its trackers) keep their info lines ("… cache synced") to themselves.
    Layer.merge(Logger.minimumLogLevel(LogLevel.Warning))
  )

/** Runs a scenario scoped, over `driver`, as a promise; a failure rejects with its pretty cause. */
export const runOver =
  (driver: Layer.Layer<KubeApi>) =>
  <A>(effect: Effect.Effect<A, Error, KubeApi | Scope.Scope>): Promise<A> =>
    Effect.runPromise(
      Effect.scoped(effect).pipe(
        Effect.provide(driver),
        Effect.catchAllCause((cause) => Effect.die(new Error(Cause.pretty(cause))))
      )
    )

/** `apiserver_request_total` as the API server counts it. */
export const apiserverRequests = (plane: BenchPlane): Promise<ReadonlyArray<Sample>> =>
  plane.metrics().then((text) => parseProm(text, (n) => n === "apiserver_request_total"))
