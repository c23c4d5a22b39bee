/** Where the scenarios run (`BenchEnv`): a real kube-apiserver, the contenders as processes; a scenario's own calls go through the driver's KubeApi. */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, type Scope } from "effect"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import type { KubeApi } from "../../src/services/KubeApi.ts"
import { type BenchPlane, cpuSeconds, driverLayer, etcdVersion, planePids, runOver, startBenchPlane } from "./controlplane.ts"
import { type Kind, type Proc, spawnContender, startupSwept } from "./proc.ts"
import type { Sample } from "./prom.ts"

export interface Limits {
  /** Requests per second; 0 = no client-side limit. */
  readonly qps: number
  /** The controller's burst at that cap (limitsAt); upstream's contender is given the same. */
  readonly burst: number
  /** A bucket for each API group's client, not one shared: client-go's default, where a program sets none. */
  readonly perGroup?: true
}

/** A cap as the controller runs it: --api-qps, and the burst it derives from it. */
export const limitsAt = (qps: number): Limits => ({ qps, burst: ControllerConfig.apiBurst(qps) })

/** How a run reads a contender's scrapes. */
export interface Reading {
  /** Its own requests between two scrapes, "verb resource code", without watches (nor the controller's leader-election leases). */
  readonly calls: (before: ReadonlyArray<Sample>, after: ReadonlyArray<Sample>) => Record<string, number>
  /** A count that reaches one per freed IP once its Events are out ("→ Events written"). */
  readonly eventsOut: (s: ReadonlyArray<Sample>) => number
}

export interface Contender {
  readonly scrape: Effect.Effect<ReadonlyArray<Sample>>
  readonly proc: Pick<Proc, "pid" | "memory">
  /** How its scrapes read when not as the controller's and the baseline's (`OWN_READING`): upstream's pod controller. */
  readonly reading?: Reading
}

/** Where contenders of kind `K` run (the controller and the baseline; the upstream comparison adds upstream's controller). */
export interface BenchEnv<K extends string = Kind> {
  /** Starts a contender for the scope: synced, its start-up sweep (controller) done. */
  readonly start: (kind: K, limits: Limits, label: string) => Effect.Effect<Contender, Error, Scope.Scope>
  /** Cumulative CPU seconds per process of the system (apiserver, etcd, contender, bench). */
  readonly cpu: (c?: Contender) => Record<string, number>
}

const benchCpu = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

/** The env over a running control plane; contenders are spawned with logs in `logDir`. */
export const apiserverEnv = (plane: BenchPlane, options: { readonly oursScript?: string } = {}) => {
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "whereabouts-bench-"))
  const pids = planePids(plane)
  const env: BenchEnv = {
    start: (kind, limits, label) =>
      Effect.gen(function* () {
        const proc = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: () =>
              spawnContender(kind, {
                kubeconfig: plane.kubeconfigPath,
                qps: limits.qps,
                burst: limits.burst,
                logDir,
                label,
                // BENCH_LOG_LEVEL: the contenders' LOG_LEVEL (debug shows why each batch did what it did).
                env: { LOG_LEVEL: process.env["BENCH_LOG_LEVEL"] ?? "info" },
                ...(kind === "ours" && options.oursScript !== undefined ? { script: options.oursScript } : {})
              }),
            catch: (e) => (e instanceof Error ? e : new Error(String(e)))
          }),
          (p) => Effect.promise(() => p.stop())
        )
        const synced = async () => {
          await proc.ready()
          if (kind === "ours") await startupSwept(proc, 300_000, 100)
        }
        yield* Effect.tryPromise({ try: synced, catch: (e) => e as Error })
        return { proc, scrape: Effect.promise(() => proc.scrape()) } satisfies Contender
      }),
    cpu: (c) => ({
      "kube-apiserver": cpuSeconds(pids.apiserver),
      etcd: cpuSeconds(pids.etcd),
      contender: cpuSeconds(c?.proc.pid),
      "bench driver": benchCpu(),
      "stolen by the hypervisor": stolenSeconds()
    })
  }
  return { env, logDir }
}

/** CPU seconds the hypervisor gave to others (/proc/stat's steal; NaN without it): latencies of two runs compare only beside it. */
export const stolenSeconds = (): number => {
  try {
    const cpu = fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/)
    return cpu[0] === "cpu" && cpu[8] !== undefined ? Number(cpu[8]) / 100 : Number.NaN
  } catch {
    return Number.NaN
  }
}

/** after − before, per key. */
export const cpuDelta = (before: Record<string, number>, after: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.keys(after).map((k) => [k, Math.round(((after[k] ?? 0) - (before[k] ?? 0)) * 100) / 100]))

/**
 * A benchmark command's API server and env; Ctrl-C or a kill exits through process.exit, whose
 * hooks stop the API server, etcd and contenders. `run` runs a scenario over the env.
 */
export const startBench = async (log: (line: string) => void, options: { readonly etcdQuotaBytes?: number } = {}) => {
  log(`starting etcd + kube-apiserver (scripts/envtest-assets.sh; a cold build takes minutes)`)
  const plane = await startBenchPlane(options)
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
  const etcd = etcdVersion(plane.assets)
  const { env, logDir } = apiserverEnv(plane)
  log(`kube-apiserver ${plane.version}, etcd ${etcd}, ${plane.server}; contender logs in ${logDir}`)
  const driver = driverLayer(plane)
  const overDriver = runOver(driver)
  const run = <A>(f: (env: BenchEnv) => Effect.Effect<A, Error, KubeApi | Scope.Scope>): Promise<A> => overDriver(f(env))
  return { plane, etcd, env, logDir, driver, run }
}

/** The client-side request limit `deploy/` ships (the controller's defaults; QPS 0: none). */
export const SHIPPED: Limits = limitsAt(ControllerConfig.OPTIONS.apiQps.default)
