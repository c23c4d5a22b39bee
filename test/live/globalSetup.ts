/**
 * The real-API-server tier: starts etcd + kube-apiserver (envtest style), installs the CRDs of
 * deploy/components, and hands the kubeconfig to the test files through provide/inject.
 *
 *   WHEREABOUTS_ENVTEST=skip     never run it
 *   WHEREABOUTS_ENVTEST=require  run it or fail the whole run
 *   (unset)                      run it when scripts/envtest-assets.sh can provide the binaries
 *                                (KUBEBUILDER_ASSETS, its cache, or a Go toolchain to build them)
 *
 * The files that allocate with the upstream CNI plugin also need scripts/whereabouts-plugin.sh to
 * provide it (WHEREABOUTS_PLUGIN, its cache, or Go): without it they skip, or, under require, the
 * run fails. So do the files that run Kubernetes' own controllers (scripts/controlplane-assets.sh,
 * KUBE_CONTROLPLANE_ASSETS) and upstream whereabouts' e2e suite (scripts/whereabouts-e2e.sh,
 * WHEREABOUTS_E2E); those files start them themselves.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import type { TestProject } from "vitest/node"
import type { AssetInfo, EnvtestInfo, PluginInfo } from "../support/live.ts"
import { type ControlPlane, DIR_PREFIX, installCrds, reapOrphans, scriptAsset, startControlPlane } from "./cluster.ts"

const HOW_TO = "set KUBEBUILDER_ASSETS or install Go (scripts/envtest-assets.sh)"
const INSIST = "WHEREABOUTS_ENVTEST=require to insist"
const log = (line: string) => process.stderr.write(`${line}\n`)

/**
 * The whereabouts plugin from scripts/whereabouts-plugin.sh, with the version line it prints when
 * run without a CNI command.
 */
const pluginInfo = (): Promise<Extract<PluginInfo, { status: "available" }>> =>
  scriptAsset("whereabouts-plugin.sh").then(
    (bin) =>
      new Promise((resolve, reject) => {
        execFile(bin, [], { env: { PATH: process.env["PATH"] ?? "" }, timeout: 10_000 }, (vErr, _out, about) => {
          const version = about.split("\n")[0]?.trim() ?? ""
          if (vErr !== null || !version.startsWith("whereabouts ")) return reject(new Error(`${bin} does not run as the whereabouts plugin: ${vErr?.message ?? about}`))
          resolve({ status: "available", path: bin, version })
        })
      })
  )

const nodeTooOld = (): string | undefined => {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
  return major > 22 || (major === 22 && minor >= 19)
    ? undefined
    : `Node ${process.versions.node} cannot load @kubernetes/client-node 2 / undici 8 (needs ≥ 22.19): run vitest through npm (npm test, npx vitest) so the node devDependency is used`
}

/** POST /apiserver/stop and /apiserver/start on a loopback port, so test files can restart the apiserver. */
const controlServer = (plane: ControlPlane): Promise<{ readonly url: string; readonly close: () => Promise<void> }> => {
  let queue: Promise<unknown> = Promise.resolve()
  const server = http.createServer((req, res) => {
    const action = req.method === "POST" ? { "/apiserver/stop": plane.stopApiServer, "/apiserver/start": plane.startApiServer }[req.url ?? ""] : undefined
    if (action === undefined) {
      res.writeHead(404).end("unknown action")
      return
    }
    const run = queue.then(action)
    queue = run.catch(() => undefined)
    run.then(
      () => res.writeHead(200).end("ok"),
      (e: unknown) => res.writeHead(500).end(`${e instanceof Error ? e.message : String(e)}\n${plane.logTail()}`)
    )
  })
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({ url: `http://127.0.0.1:${port}`, close: () =>
          new Promise((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const mode = process.env["WHEREABOUTS_ENVTEST"] ?? ""
  if (!["", "skip", "require"].includes(mode)) throw new Error(`WHEREABOUTS_ENVTEST=${mode}: use "skip", "require", or leave it unset`)
  const skip = (reason: string, hint?: string) => {
    log(`real-API-server tests skipped: ${reason}; ${hint === undefined ? "" : `${hint}; `}${INSIST}`)
    project.provide("envtest", { status: "skipped", reason } satisfies EnvtestInfo)
    return undefined
  }
  if (mode === "skip") {
    log("real-API-server tests skipped: WHEREABOUTS_ENVTEST=skip")
    project.provide("envtest", { status: "skipped", reason: "WHEREABOUTS_ENVTEST=skip" } satisfies EnvtestInfo)
    return undefined
  }

  const tooOld = nodeTooOld()
  if (tooOld !== undefined) {
    if (mode === "require") throw new Error(`WHEREABOUTS_ENVTEST=require, but ${tooOld}`)
    return skip(tooOld)
  }
  // Both may build from the Go module proxy on a cold cache: side by side, not one after the other.
  const [found, plugin, controllers, e2eSuite] = await Promise.allSettled([scriptAsset("envtest-assets.sh"), pluginInfo(), scriptAsset("controlplane-assets.sh"), scriptAsset("whereabouts-e2e.sh")])
  if (found.status === "rejected") {
    const why = found.reason instanceof Error ? found.reason.message : String(found.reason)
    if (mode === "require") throw new Error(`WHEREABOUTS_ENVTEST=require, but no kube-apiserver/etcd: ${why}`)
    return skip(`no kube-apiserver/etcd (${why})`, HOW_TO)
  }
  const assets = found.value
  let pluginProvided: PluginInfo
  if (plugin.status === "fulfilled") {
    pluginProvided = plugin.value
    log(`envtest: upstream CNI plugin ${plugin.value.path} (${plugin.value.version})`)
  } else {
    const why = plugin.reason instanceof Error ? plugin.reason.message : String(plugin.reason)
    if (mode === "require") throw new Error(`WHEREABOUTS_ENVTEST=require, but no upstream whereabouts CNI plugin: ${why}`)
    log(`upstream-plugin tests skipped: no whereabouts CNI plugin (${why}); set WHEREABOUTS_PLUGIN or install Go (scripts/whereabouts-plugin.sh); ${INSIST}`)
    pluginProvided = { status: "missing", reason: `no whereabouts CNI plugin (${why})` }
  }

  const optional = (got: PromiseSettledResult<string>, what: string, how: string): AssetInfo => {
    if (got.status === "fulfilled") return { status: "available", path: got.value }
    const why = got.reason instanceof Error ? got.reason.message : String(got.reason)
    if (mode === "require") throw new Error(`WHEREABOUTS_ENVTEST=require, but no ${what}: ${why}`)
    log(`tests that need ${what} skipped (${why}); ${how}; ${INSIST}`)
    return { status: "missing", reason: `no ${what} (${why})` }
  }
  const kubeControllers = optional(controllers, "kube-controller-manager and kube-scheduler", "set KUBE_CONTROLPLANE_ASSETS or install Go (scripts/controlplane-assets.sh)")
  const upstreamE2e = optional(e2eSuite, "upstream whereabouts' e2e suite", "set WHEREABOUTS_E2E or install Go (scripts/whereabouts-e2e.sh)")

  for (const dir of reapOrphans()) log(`envtest: removed ${dir} and its processes, left by a killed run`)
  const started = Date.now()
  const plane = await startControlPlane(fs.mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX)), assets)
  let control: Awaited<ReturnType<typeof controlServer>> | undefined
  try {
    const crds = await installCrds(plane)
    control = await controlServer(plane)
    log(`envtest: kube-apiserver ${plane.server} ready with ${crds.length} CRDs in ${((Date.now() - started) / 1000).toFixed(1)} s (${plane.dir})`)
  } catch (e) {
    const message = `${e instanceof Error ? e.message : String(e)}\n${plane.logTail()}`
    await plane.stop()
    throw new Error(message)
  }
  project.provide("envtest", { status: "running", kubeconfigPath: plane.kubeconfigPath, server: plane.server, controlUrl: control.url } satisfies EnvtestInfo)
  project.provide("whereaboutsPlugin", pluginProvided)
  project.provide("kubeControllers", kubeControllers)
  project.provide("upstreamE2e", upstreamE2e)
  project.provide("envtestAssets", assets)
  project.provide("planeDir", plane.dir)
  return async () => {
    await control?.close()
    await plane.stop()
  }
}
