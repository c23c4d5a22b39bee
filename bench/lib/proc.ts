/** The contenders as processes (`src/programs/main.ts run`, `bench/baseline.ts run`), configured alike, observed through /metrics and /proc. */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { freePort } from "../../test/live/cluster.ts"
import { cpuSeconds, procMemory } from "./controlplane.ts"
import { ROOT } from "./paths.ts"
import { parseProm, sum } from "./prom.ts"

export type Kind = "ours" | "baseline"

export interface ProcOptions {
  readonly kubeconfig: string
  readonly qps: number
  /** The burst the controller derives from `qps` (Limits); passed on for older checkouts only. */
  readonly burst: number
  readonly logDir: string
  readonly label: string
  readonly env?: Readonly<Record<string, string>>
  /** Extra node flags (e.g. --cpu-prof). */
  readonly nodeArgs?: ReadonlyArray<string>
  /** The controller's entry point; default src/programs/main.ts (the compiled dist/ one for RSS). */
  readonly script?: string
}

const get = async (url: string): Promise<{ status: number; body: string }> => {
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) })
  return { status: res.status, body: await res.text() }
}

// Processes still running when the benchmark exits (an error, Ctrl-C) are killed with it.
const running = new Set<ChildProcess>()
process.on("exit", () => {
  for (const c of running) c.kill("SIGKILL")
})

/**
 * `command` with its output in `logFile` and only PATH and HOME of this environment besides `env`;
 * `ready` polls `readyUrl` until it answers 200, `stop` sends SIGTERM and SIGKILL after `graceMs`.
 */
export const spawnLogged = (command: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>>, logFile: string, readyUrl: string, graceMs: number) => {
  const fd = fs.openSync(logFile, "w")
  const child = spawn(command, args, { cwd: ROOT, stdio: ["ignore", fd, fd], env: { PATH: process.env["PATH"] ?? "", HOME: process.env["HOME"] ?? "", ...env } })
  fs.closeSync(fd)
  running.add(child)
  let exited = false
  const exit = new Promise<void>((resolve) => child.once("exit", () => ((exited = true), running.delete(child), resolve())))
  const tail = (lines = 30) => {
    try {
      return fs.readFileSync(logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n")
    } catch {
      return ""
    }
  }
  const name = path.basename(logFile, ".log")
  const exitsWithin = async (ms: number): Promise<boolean> => {
    // The timer goes once the race is decided (left running, it holds the benchmark open).
    const timer = new AbortController()
    return Promise.race([exit.then(() => true), sleep(ms, false, { signal: timer.signal })]).finally(() => timer.abort())
  }
  return {
    pid: child.pid!,
    logFile,
    tail,
    exited: () => exited,
    /** Whether the process has exited, or does within `ms`. */
    exitsWithin,
    ready: async (timeoutMs = 120_000) => {
      for (const deadline = Date.now() + timeoutMs; ; await sleep(50)) {
        if (exited) throw new Error(`${name} exited before ready:\n${tail()}`)
        if ((await get(readyUrl).catch(() => undefined))?.status === 200) return
        if (Date.now() > deadline) throw new Error(`${name} not ready within ${timeoutMs / 1000} s:\n${tail()}`)
      }
    },
    stop: async () => {
      if (exited) return
      child.kill("SIGTERM")
      if (!(await exitsWithin(graceMs))) child.kill("SIGKILL")
      await exit
    }
  }
}

/** Spawns a contender with node (the same binary as this process: Node 24 under npm). */
export const spawnContender = async (kind: Kind, o: ProcOptions) => {
  const [metricsPort, healthPort] = [await freePort(), await freePort()]
  const script = o.script ?? path.join(ROOT, kind === "ours" ? "src/programs/main.ts" : "bench/baseline.ts")
  // Ours with --expose-gc unless the image's flags are given (which hold it): its heap reclaim runs as deployed.
  const nodeArgs = o.nodeArgs ?? (kind === "ours" ? ["--expose-gc"] : [])
  const env = {
    KUBECONFIG: o.kubeconfig,
    API_QPS: String(o.qps),
    // Read by checkouts from before the burst followed --api-qps (A/B runs): the same burst.
    API_BURST: String(o.burst),
    METRICS_PORT: String(metricsPort),
    HEALTH_PORT: String(healthPort),
    LEASE_NAME: `bench-${o.label.toLowerCase().replace(/[^a-z0-9-]/g, "-")}`,
    POD_NAME: `bench-${o.label}`,
    ...o.env
  }
  const p = spawnLogged(process.execPath, [...nodeArgs, script, "run"], env, path.join(o.logDir, `${o.label}.log`), `http://127.0.0.1:${healthPort}/readyz`, 40_000)
  return {
    ...p,
    kind,
    scrape: async () => parseProm((await get(`http://127.0.0.1:${metricsPort}/metrics`)).body, (n) => n.startsWith("whereabouts_controller_")),
    memory: () => procMemory(p.pid)
  }
}

export type Proc = Awaited<ReturnType<typeof spawnContender>>

/** Polls the controller's metrics, every `everyMs`, until `sweeps_total` counts its start-up sweep. Fails once the process is gone. */
export const startupSwept = async (p: Proc, timeoutMs: number, everyMs: number): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (p.exited()) throw new Error(`${p.kind} exited before the start-up sweep\n${p.tail(8)}`)
    // A contender busy with a big list may answer late; a missed scrape is just retried.
    const s = await p.scrape().catch(() => undefined)
    if (s !== undefined && sum(s, "whereabouts_controller_sweeps_total") >= 1) return
    if (Date.now() > deadline) throw new Error(`${p.kind}: timed out after ${timeoutMs / 1000} s waiting until the start-up sweep\n${p.tail()}`)
    await sleep(everyMs)
  }
}

/** How long memoryAfterSync lets a contender settle after its sync before it reads RSS again. */
const SETTLE_MS = 10_000

/** Starts a contender, waits for its caches (the controller: and its start-up sweep), reads its RSS then and SETTLE_MS later (and its CPU in between), stops it. */
export const memoryAfterSync = async (kind: Kind, o: ProcOptions) => {
  const t = performance.now()
  const p = await spawnContender(kind, { ...o, env: { LOG_LEVEL: "info", ...o.env } })
  try {
    await p.ready(300_000)
    const readyMs = performance.now() - t
    if (kind === "ours") await startupSwept(p, 300_000, 200)
    const [afterSync, cpuAfterSync] = [p.memory(), cpuSeconds(p.pid)]
    await sleep(SETTLE_MS)
    const [settled, cpu] = [p.memory(), cpuSeconds(p.pid)]
    return { label: o.label, kind, readyMs, rssAfterSync: afterSync.rss, rss: settled.rss, hwm: settled.hwm, cpu, idleMillicores: ((cpu - cpuAfterSync) * 1000 * 1000) / SETTLE_MS }
  } finally {
    await p.stop()
  }
}
