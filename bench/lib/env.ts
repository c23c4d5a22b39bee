/**
 * One interface over the two places the scenarios run: the in-memory API server (contenders in
 * process) and a real kube-apiserver (contenders as processes). A scenario is written once over
 * `BenchEnv`; its own calls go through the driver KubeApi in context (unlimited, uncounted).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Logger, LogLevel, type Scope } from "effect"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import { type BenchPlane, cpuSeconds, planePids } from "./controlplane.ts"
import { type Limits, memoryWorld, startContender } from "./memenv.ts"
import { type Kind, type Proc, spawnContender, waitMetric } from "./proc.ts"
import { type Sample, sum } from "./prom.ts"

export type { Kind, Limits }

export interface Contender {
  readonly kind: Kind
  readonly scrape: Effect.Effect<ReadonlyArray<Sample>>
  /** In memory: requests its client-side rate limiter let through so far (counted on admission). */
  readonly admitted?: () => number
  /** The process, on a real API server. */
  readonly proc?: Proc
}

export interface BenchEnv {
  readonly name: "memory" | "apiserver"
  /** Starts a contender for the scope: synced, its start-up sweep (controller) done. */
  readonly start: (kind: Kind, limits: Limits, label: string, config?: Partial<ControllerConfig.ControllerConfigShape>) => Effect.Effect<Contender, Error, Scope.Scope>
  /** Cumulative CPU seconds per process of the system (apiserver, etcd, contender, bench). */
  readonly cpu: (c?: Contender) => Record<string, number>
}

const benchCpu = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

/** A fresh in-memory world for one run; returns the env and the driver KubeApi. */
export const memoryEnv = (latency: string) => {
  const world = memoryWorld({ latency: latency as `${number} millis` })
  const env: BenchEnv = {
    name: "memory",
    start: (kind, limits, _label, config = {}) =>
      Effect.map(
        // The contender's log lines would flood the benchmark's output: warnings and errors only.
        startContender(world, kind, limits, config).pipe(Logger.withMinimumLogLevel(LogLevel.Warning)),
        (h): Contender => ({ kind, scrape: h.scrape, admitted: h.admitted })
      ),
    cpu: () => ({ "bench process (API server, contender and driver)": benchCpu() })
  }
  return { env, driver: world.driver, state: world.state }
}

/** The env over a running control plane; contenders are spawned with logs in `logDir`. */
export const apiserverEnv = (plane: BenchPlane, options: { readonly nodeArgs?: ReadonlyArray<string>; readonly oursScript?: string } = {}) => {
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "whereabouts-bench-"))
  const pids = planePids(plane)
  const env: BenchEnv = {
    name: "apiserver",
    start: (kind, limits, label, config = {}) =>
      Effect.gen(function* () {
        const extra: Record<string, string> = {}
        if (config.workers !== undefined) extra["WORKERS"] = String(config.workers)
        if (config.sweepOnStart === false) extra["SWEEP_ON_START"] = "false"
        if (config.maxInFlight !== undefined) extra["MAX_IN_FLIGHT"] = Object.entries(config.maxInFlight).map(([k, n]) => `${k}=${n}`).join(",")
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
                env: { LOG_LEVEL: process.env["BENCH_LOG_LEVEL"] ?? "info", ...extra },
                ...(options.nodeArgs === undefined ? {} : { nodeArgs: options.nodeArgs }),
                ...(kind === "ours" && options.oursScript !== undefined ? { script: options.oursScript } : {})
              }),
            catch: (e) => (e instanceof Error ? e : new Error(String(e)))
          }),
          (p) => Effect.promise(() => p.stop())
        )
        yield* Effect.tryPromise({ try: () => proc.ready(), catch: (e) => e as Error })
        if (kind === "ours" && config.sweepOnStart !== false) {
          yield* Effect.tryPromise({
            try: () => waitMetric(proc, (s) => sum(s, "whereabouts_controller_sweeps_total") >= 1, "start-up sweep done", 300_000, 100),
            catch: (e) => e as Error
          })
        }
        return { kind, proc, scrape: Effect.promise(() => proc.scrape()) } satisfies Contender
      }),
    cpu: (c) => ({
      "kube-apiserver": pids.apiserver === undefined ? Number.NaN : cpuSeconds(pids.apiserver),
      etcd: pids.etcd === undefined ? Number.NaN : cpuSeconds(pids.etcd),
      contender: c?.proc === undefined ? Number.NaN : cpuSeconds(c.proc.pid),
      "bench driver": benchCpu(),
      "stolen by the hypervisor": stolenSeconds()
    })
  }
  return { env, logDir }
}

/**
 * CPU time the hypervisor gave to others while this machine's vCPUs wanted it (/proc/stat's steal,
 * summed over CPUs): the same work takes longer the more of it there is, so latencies of two runs
 * compare only with it beside them. NaN where /proc/stat has no such field.
 */
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

export const defaults = ControllerConfig.defaults

/** The client-side request limit `deploy/` ships (the controller's defaults; QPS 0: none). */
export const SHIPPED: Limits = { qps: ControllerConfig.DEFAULTS.apiQps, burst: ControllerConfig.DEFAULTS.apiBurst }
