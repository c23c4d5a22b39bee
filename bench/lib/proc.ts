/**
 * Contenders as processes against a real API server: the controller exactly as deployed
 * (`node src/programs/main.ts run`) or the baseline (`node bench/baseline.ts run`), configured by
 * the same environment variables, observed through their /metrics and /proc.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { freePort } from "../../test/live/cluster.ts"
import { ROOT, cpuSeconds } from "./controlplane.ts"
import { parseProm, type Sample, sum } from "./prom.ts"

export type Kind = "ours" | "baseline"

export { freePort }

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

export interface Proc {
  readonly kind: Kind
  readonly pid: number
  readonly logFile: string
  /** Resolves once /readyz answers 200 (caches synced). */
  readonly ready: (timeoutMs?: number) => Promise<void>
  readonly scrape: () => Promise<ReadonlyArray<Sample>>
  /** VmRSS and VmHWM in bytes. */
  readonly memory: () => { readonly rss: number; readonly hwm: number }
  readonly stop: () => Promise<void>
  readonly tail: (lines?: number) => string
}

const status = (pid: number): { rss: number; hwm: number } => {
  const text = fs.readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? Number.NaN) * 1024
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") }
}

const get = async (url: string): Promise<{ status: number; body: string }> => {
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) })
  return { status: res.status, body: await res.text() }
}

/**
 * Whether `exit` is still pending after `ms`. The timer goes with the answer: a grace timer left
 * running kept a finished benchmark alive for its whole length.
 */
export const outlasts = async (exit: Promise<unknown>, ms: number): Promise<boolean> => {
  const timer = new AbortController()
  try {
    return await Promise.race([exit.then(() => false), sleep(ms, true, { signal: timer.signal })])
  } finally {
    timer.abort()
  }
}

// Contenders still running when the benchmark exits (an error, Ctrl-C) are killed with it.
const running = new Set<ChildProcess>()
let hooked = false
const hookExit = () => {
  if (hooked) return
  hooked = true
  process.on("exit", () => {
    for (const c of running) c.kill("SIGKILL")
  })
}

/** Spawns a contender with node (the same binary as this process: Node 24 under npm). */
export const spawnContender = async (kind: Kind, o: ProcOptions): Promise<Proc> => {
  const [metricsPort, healthPort] = [await freePort(), await freePort()]
  const script = o.script ?? (kind === "ours" ? path.join(ROOT, "src/programs/main.ts") : path.join(ROOT, "bench/baseline.ts"))
  const logFile = path.join(o.logDir, `${o.label}.log`)
  const fd = fs.openSync(logFile, "w")
  // Ours with --expose-gc unless the image's flags are given (which hold it): its heap reclaim runs as deployed.
  const nodeArgs = o.nodeArgs ?? (kind === "ours" ? ["--expose-gc"] : [])
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, script, "run"], {
    cwd: ROOT,
    stdio: ["ignore", fd, fd],
    env: {
      PATH: process.env["PATH"] ?? "",
      HOME: process.env["HOME"] ?? "",
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
  })
  fs.closeSync(fd)
  hookExit()
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
  const pid = child.pid!
  return {
    kind,
    pid,
    logFile,
    ready: async (timeoutMs = 120_000) => {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        if (exited) throw new Error(`${o.label} exited before ready:\n${tail()}`)
        try {
          if ((await get(`http://127.0.0.1:${healthPort}/readyz`)).status === 200) return
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline) throw new Error(`${o.label} not ready within ${timeoutMs / 1000} s:\n${tail()}`)
        await sleep(50)
      }
    },
    scrape: async () => parseProm((await get(`http://127.0.0.1:${metricsPort}/metrics`)).body, (n) => n.startsWith("whereabouts_controller_")),
    memory: () => status(pid),
    stop: async () => {
      if (exited) return
      child.kill("SIGTERM")
      if (await outlasts(exit, 40_000)) child.kill("SIGKILL")
      await exit
    },
    tail
  }
}

/** Polls `scrape` until `cond` holds; returns the time (performance.now()) it first held. */
export const waitMetric = async (p: Proc, cond: (s: ReadonlyArray<Sample>) => boolean, what: string, timeoutMs: number, everyMs = 50): Promise<number> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    // A contender busy with a big list may answer late; a missed scrape is just retried.
    const s = await p.scrape().catch(() => undefined)
    if (s !== undefined && cond(s)) return performance.now()
    if (Date.now() > deadline) throw new Error(`${p.kind}: timed out waiting until ${what}\n${p.tail()}`)
    await sleep(everyMs)
  }
}

export interface MemoryReading {
  readonly label: string
  readonly kind: Kind
  readonly readyMs: number
  readonly rssAfterSync: number
  /** VmRSS 10 s after the caches synced (the controller: and its start-up sweep ran). */
  readonly rss: number
  readonly hwm: number
  readonly cpu: number
}

/**
 * Starts a contender at the client limit given, waits for its caches (the controller: and its
 * start-up sweep), reads its RSS then and 10 s later, and stops it.
 */
export const memoryAfterSync = async (
  kind: Kind,
  o: Omit<ProcOptions, "env"> & { readonly env?: Readonly<Record<string, string>> }
): Promise<MemoryReading> => {
  const t = performance.now()
  const p = await spawnContender(kind, { ...o, env: { LOG_LEVEL: "info", ...o.env } })
  try {
    await p.ready(300_000)
    const readyMs = performance.now() - t
    if (kind === "ours") await waitMetric(p, (s) => sum(s, "whereabouts_controller_sweeps_total") >= 1, "start-up sweep", 300_000, 200)
    const afterSync = p.memory()
    await sleep(10_000)
    const settled = p.memory()
    return { label: o.label, kind, readyMs, rssAfterSync: afterSync.rss, rss: settled.rss, hwm: settled.hwm, cpu: cpuSeconds(p.pid) }
  } finally {
    await p.stop()
  }
}
