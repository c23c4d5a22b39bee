/**
 * What live test files need from the real-API-server tier (started by test/live/globalSetup.ts):
 * whether it runs, the admin kubeconfig, a KubeApi layer over it, and a way to stop and restart
 * the apiserver mid-run. Values arrive through vitest's provide/inject, never process.env.
 */
import { Effect, Layer } from "effect"
import { describe, inject } from "vitest"
import { type ControllerConfigShape, layerWith } from "../../src/services/ControllerConfig.ts"
import type { KubeApi } from "../../src/services/KubeApi.ts"

export type EnvtestInfo =
  | {
      readonly status: "running"
      readonly kubeconfigPath: string
      readonly server: string
      /** Base URL of the harness's control endpoint (POST /apiserver/stop, /apiserver/start). */
      readonly controlUrl: string
    }
  | { readonly status: "skipped"; readonly reason: string }

/** The upstream whereabouts CNI plugin, from scripts/whereabouts-plugin.sh (provided only when the tier runs). */
export type PluginInfo =
  | {
      readonly status: "available"
      /** Absolute path of the `whereabouts` executable. */
      readonly path: string
      /** What it says it is, e.g. `whereabouts v0.9.2 linux/amd64`. */
      readonly version: string
    }
  | { readonly status: "missing"; readonly reason: string }

/** A Go-built asset a few files need (a directory or a binary), from its script under scripts/. */
export type AssetInfo = { readonly status: "available"; readonly path: string } | { readonly status: "missing"; readonly reason: string }

declare module "vitest" {
  export interface ProvidedContext {
    envtest: EnvtestInfo
    whereaboutsPlugin: PluginInfo
    /** A directory with kube-controller-manager and kube-scheduler (scripts/controlplane-assets.sh). */
    kubeControllers: AssetInfo
    /** Upstream whereabouts' e2e test binary (scripts/whereabouts-e2e.sh). */
    upstreamE2e: AssetInfo
    /** The directory with kube-apiserver and etcd the tier runs (scripts/envtest-assets.sh). */
    envtestAssets: string
    /** The tier's control-plane dir (cluster.ts): its certs, the API server's key and CA among them. */
    planeDir: string
  }
}

/** The tier's state; throws when the file runs outside the "live" project (no globalSetup ran). */
export const envtest = (): EnvtestInfo => {
  const info = inject("envtest")
  if (info === undefined) throw new Error("no envtest context: run live tests through the vitest \"live\" project (vitest.config.ts)")
  return info
}

/**
 * `describe` when the tier runs; `describe.skip` with the reason when it was skipped. Never skips
 * under WHEREABOUTS_ENVTEST=require: globalSetup fails the run instead of reporting "skipped".
 */
export const describeLive = (name: string, body: () => void): void => {
  const info = envtest()
  if (info.status === "skipped") describe.skip(`${name} (skipped: ${info.reason})`, body)
  else describe(name, body)
}

/**
 * describeLive for files that allocate with the upstream CNI plugin: skipped with the reason when the
 * tier is skipped or the plugin could not be had. Under WHEREABOUTS_ENVTEST=require a missing plugin
 * fails globalSetup instead.
 */
export const describeWithPlugin = (name: string, body: () => void): void => {
  const info = envtest()
  const plugin = info.status === "running" ? inject("whereaboutsPlugin") : undefined
  if (info.status === "skipped") describe.skip(`${name} (skipped: ${info.reason})`, body)
  else if (plugin?.status !== "available") describe.skip(`${name} (skipped: ${plugin?.reason ?? "no plugin info from globalSetup"})`, body)
  else describe(name, body)
}

const assetMissing = (key: "kubeControllers" | "upstreamE2e"): string | undefined => {
  const info = envtest()
  if (info.status === "skipped") return info.reason
  const plugin = inject("whereaboutsPlugin")
  if (plugin?.status !== "available") return plugin?.reason ?? "no plugin info from globalSetup"
  const asset = inject(key)
  return asset?.status === "available" ? undefined : (asset?.reason ?? `no ${key} info from globalSetup`)
}

/**
 * describeWithPlugin for files that also run kube-controller-manager and kube-scheduler (they start
 * them themselves, test/live/support/controlplane.ts); with `upstreamE2e`, upstream's e2e suite too.
 * Under WHEREABOUTS_ENVTEST=require a missing one fails globalSetup instead.
 */
export const describeWithKubernetes = (name: string, body: () => void, options: { readonly upstreamE2e?: boolean } = {}): void => {
  const why = assetMissing("kubeControllers") ?? (options.upstreamE2e === true ? assetMissing("upstreamE2e") : undefined)
  if (why !== undefined) describe.skip(`${name} (skipped: ${why})`, body)
  else describe(name, body)
}

/** What describeWithKubernetes checked: the controllers' directory, the e2e binary, the tier's assets and dir. */
export const kubernetesAssets = () => {
  const path = (key: "kubeControllers" | "upstreamE2e") => {
    const a = inject(key)
    if (a?.status !== "available") throw new Error(`${key} is not available: ${a?.reason ?? "no info"}`)
    return a.path
  }
  return { controllers: () => path("kubeControllers"), upstreamE2e: () => path("upstreamE2e"), envtest: envtestAssets(), planeDir: inject("planeDir") }
}

/** The directory of the tier's kube-apiserver, etcd and kubectl (scripts/envtest-assets.sh); only meaningful inside describeLive. */
export const envtestAssets = (): string => {
  const dir = inject("envtestAssets")
  if (dir === undefined) throw new Error("no envtest assets: the real-API-server tier is not running")
  return dir
}

/** The plugin executable; only meaningful inside describeWithPlugin. */
export const pluginBinary = (): string => {
  const plugin = inject("whereaboutsPlugin")
  if (plugin?.status !== "available") throw new Error(`the upstream whereabouts plugin is not available: ${plugin?.reason ?? "no plugin info"}`)
  return plugin.path
}

/** Only meaningful inside describeLive. */
export const runningEnvtest = (): Extract<EnvtestInfo, { status: "running" }> => {
  const info = envtest()
  if (info.status !== "running") throw new Error(`the real-API-server tier is not running: ${info.reason}`)
  return info
}

/**
 * KubeApi over the harness's API server (the layerLive under test). Imported lazily: client-node
 * and undici 8 need Node ≥ 22.19, and a skipped tier must still load on an older Node.
 */
export const liveKubeApi = (overrides: Partial<ControllerConfigShape> = {}): Layer.Layer<KubeApi> =>
  Layer.unwrapEffect(
    Effect.promise(() => import("../../src/services/KubeApiLive.ts")).pipe(
      Effect.map(({ layerLive }) =>
        layerLive.pipe(Layer.provide(layerWith({ kubeconfig: runningEnvtest().kubeconfigPath, ...overrides })), Layer.orDie)
      )
    )
  )

const control = async (action: "stop" | "start"): Promise<void> => {
  const res = await fetch(`${runningEnvtest().controlUrl}/apiserver/${action}`, { method: "POST" })
  if (!res.ok) throw new Error(`envtest control: ${action} the apiserver failed: ${await res.text()}`)
}

/** Stops the kube-apiserver (etcd keeps the data); resolves once it has exited. */
export const stopApiServer = (): Promise<void> => control("stop")
/** Starts it again on the same port with the same certs; resolves once /readyz is ok. */
export const startApiServer = (): Promise<void> => control("start")

/** A namespace name of its own for one test file run (the live cluster is shared by all files). */
export const uniqueNamespace = (prefix: string): string => `${prefix}-${Date.now().toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`
