/**
 * Kubernetes' own controllers and scheduler next to an API server of the live tier: a
 * kube-controller-manager with every controller (StatefulSet, ReplicaSet, Deployment, Job, garbage
 * collector, pod GC, node lifecycle, taint eviction, namespace, service account) and a
 * kube-scheduler, started on demand by the files that need them (two cores: the others do not pay
 * for them) and stopped with their scope.
 *
 * The controller-manager signs service-account tokens with the API server's own key and publishes
 * its CA, as in a real cluster: both come from the control plane's dir (cluster.ts writes
 * `certs/sa.key` and the API server writes `certs/apiserver.crt`, its serving cert and then the CA
 * that signed it). Leader election is off and their secure ports are closed: one of each, loopback
 * only. The node lifecycle controller notices a silent node after `nodeMonitorGracePeriod`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { DIR_PREFIX, launch, onProcessExit, type Running, STATE_FILE, terminate } from "../cluster.ts"
import { credentialsOf, rest } from "./rest.ts"

export interface KubeControllersOptions {
  /** A directory with `kube-controller-manager` and `kube-scheduler` (scripts/controlplane-assets.sh). */
  readonly assets: string
  /** The API server's dir (cluster.ts): `certs/sa.key` and `certs/apiserver.crt` are read from it. */
  readonly planeDir: string
  /** An admin kubeconfig of that API server. */
  readonly kubeconfig: string
  /** Go duration; Kubernetes' default is 50s. */
  readonly nodeMonitorGracePeriod?: string
  /** More controller-manager flags. */
  readonly extraArgs?: ReadonlyArray<string>
}

export interface KubeControllers {
  readonly dir: string
  /** The last lines of both logs, for failure messages. */
  readonly logTail: (lines?: number) => string
  /** Whether both still run. */
  readonly running: () => boolean
}

const tail = (file: string, lines: number): string => {
  try {
    return fs.readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n")
  } catch {
    return "(no log)"
  }
}

/** The last certificate of a PEM bundle: the CA behind the API server's self-signed serving cert. */
export const lastCertificate = (pem: string): string => {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? []
  if (blocks.length === 0) throw new Error("no certificate in the API server's cert file")
  return `${blocks.at(-1)!}\n`
}

const alive = new Set<Running>()
let exitHook = false

/** Children still running when this process exits are killed (vitest exits without our finalizers on a crash). */
const killOnExit = () => {
  if (exitHook) return
  exitHook = true
  onProcessExit(() => {
    for (const r of alive) if (!r.done) r.child.kill("SIGKILL")
  })
}

/**
 * The controller-manager's readiness as a user would see it: a namespace created now gets its
 * `default` ServiceAccount (its controllers started and their caches synced); the namespace is
 * deleted again, which needs the namespace controller too.
 */
const awaitControllers = (kubeconfig: string, running: () => boolean, logTail: () => string) =>
  Effect.tryPromise({ catch: (e) => (e instanceof Error ? e : new Error(String(e))), try: async () => {
    const creds = credentialsOf(kubeconfig)
    const probe = `kcm-probe-${Date.now().toString(36)}`
    await rest(creds, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: probe } })
    const deadline = Date.now() + 60_000
    for (;;) {
      if (!running()) throw new Error(`kube-controller-manager or kube-scheduler exited:\n${logTail()}`)
      if ((await rest(creds, "GET", `/api/v1/namespaces/${probe}/serviceaccounts/default`)).status === 200) break
      if (Date.now() > deadline) throw new Error(`kube-controller-manager made no ServiceAccount in a new namespace within 60 s:\n${logTail()}`)
      await new Promise((r) => setTimeout(r, 250))
    }
    await rest(creds, "DELETE", `/api/v1/namespaces/${probe}`)
  } })

/** Starts both next to the API server; they stop (SIGTERM, then SIGKILL) when the scope closes. */
export const startKubeControllers = (options: KubeControllersOptions) =>
  Effect.gen(function* () {
    killOnExit()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${DIR_PREFIX}kcm-`))
    // Copies inside the dir, so each process's command line names it and reapOrphans can find them.
    const kubeconfig = path.join(dir, "kubeconfig")
    fs.copyFileSync(options.kubeconfig, kubeconfig)
    const caFile = path.join(dir, "ca.crt")
    fs.writeFileSync(caFile, lastCertificate(fs.readFileSync(path.join(options.planeDir, "certs", "apiserver.crt"), "utf8")))
    const logs = { kcm: path.join(dir, "kube-controller-manager.log"), scheduler: path.join(dir, "kube-scheduler.log") }
    const common = [`--kubeconfig=${kubeconfig}`, "--leader-elect=false", "--secure-port=0"]
    const kcmArgs = [
      ...common,
      "--controllers=*",
      `--service-account-private-key-file=${path.join(options.planeDir, "certs", "sa.key")}`,
      `--root-ca-file=${caFile}`,
      `--node-monitor-grace-period=${options.nodeMonitorGracePeriod ?? "10s"}`,
      "--node-monitor-period=1s",
      ...(options.extraArgs ?? [])
    ]
    const children: Array<Running> = []
    const logTail = (lines = 30) =>
      `--- ${logs.kcm}\n${tail(logs.kcm, lines)}\n--- ${logs.scheduler}\n${tail(logs.scheduler, lines)}`
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        await Promise.all(children.map((c) => terminate(c)))
        for (const c of children) alive.delete(c)
        fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
      })
    )
    for (const [bin, args, log] of [
      ["kube-controller-manager", kcmArgs, logs.kcm],
      ["kube-scheduler", common, logs.scheduler]
    ] as const) {
      const r = launch(path.join(options.assets, bin), args, log)
      children.push(r)
      alive.add(r)
    }
    fs.writeFileSync(path.join(dir, STATE_FILE), JSON.stringify({ owner: process.pid, pids: children.map((c) => c.child.pid) }))
    const running = () => children.every((c) => !c.done)
    yield* awaitControllers(options.kubeconfig, running, logTail)
    return { dir, logTail, running } satisfies KubeControllers
  })
