/**
 * The two controller replicas as the Deployment runs them: the image's program, flags and
 * environment, leader-elected as the shipped RBAC's ServiceAccount, through the chaos proxy; a
 * killed replica comes back under its name. From their logs, when each led and ran its deletion
 * loop (the two-leaders check); from /proc and /metrics: RSS, V8's heap in use, queue depth, the leader gauge.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { type ControllerProcess, type Exit, type LogLine, startController } from "../../test/live/support/controller-process.ts"
import { rssOf } from "../lib/controlplane.ts"
import { delta, parseProm, sum } from "../lib/prom.ts"
import type { History } from "./history.ts"
import type { Interval } from "./invariants.ts"
import { POOLS_NAMESPACE } from "./networks.ts"

export const IDENTITIES = ["soak-a", "soak-b"] as const

export interface Generation {
  readonly identity: string
  readonly n: number
  readonly pid: number
  readonly startedAt: number
  exitedAt: number | undefined
  exit: Exit | undefined
  /** Why it ended: the harness's fault, the end of the run, or nothing the harness did. */
  endedBy: "SIGKILL" | "SIGTERM" | "end of run" | undefined
}

/** The last scrape of a process's request counters: requests by verb and HTTP code (or failure reason). */
export type Requests = Record<string, number>

export interface Sample {
  readonly t: number
  readonly identity: string
  readonly pid: number
  readonly rssBytes: number
  /** V8's heap in use (nodejs_heap_size_used_bytes): its floor is what each major collection kept. */
  readonly heapUsedBytes: number | undefined
  readonly leader: number | undefined
  readonly queueDepth: number | undefined
  readonly inFlight: number | undefined
}

interface ReplicaOptions {
  readonly kubeconfig: string
  readonly script: string
  readonly nodeArgs: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly logDir: string
  readonly history: History
}

const timeOf = (line: LogLine): number => {
  try {
    const ts = (JSON.parse(line.raw) as { timestamp?: string }).timestamp
    return ts === undefined ? Date.now() : Date.parse(ts)
  } catch {
    return Date.now()
  }
}

export const startReplicas = (o: ReplicaOptions) => {
  const current = new Map<string, { proc: ControllerProcess; gen: Generation }>()
  const generations: Array<Generation> = []
  const samples: Array<Sample> = []
  /** Open intervals per identity: since when it led / ran its deletion loop. */
  const leading = new Map<string, number>()
  const acting = new Map<string, number>()
  const leaderships: Array<Interval> = []
  const actings: Array<Interval> = []
  /** Per process (pid): its request counters at the last scrape. */
  const requests = new Map<number, Requests>()
  /** Scrape rounds in which both replicas' leader gauge read 1. */
  const bothLeading: Array<number> = []

  const close = (open: Map<string, number>, closed: Array<Interval>, who: string, at: number) => {
    const from = open.get(who)
    if (from === undefined) return
    open.delete(who)
    closed.push({ who, from, to: at })
  }
  const onLine = (identity: string) => (line: LogLine) => {
    const m = line.message
    const at = timeOf(line)
    if (m === "became leader") leading.set(identity, at)
    else if (m.startsWith("lost leadership") || m === "leader election stopping") close(leading, leaderships, identity, at)
    else if (m === "deletion loop started") acting.set(identity, at)
    else if (m.startsWith("deletion loop stopping")) close(acting, actings, identity, at)
    else if (!(line.logLevel === "ERROR" || line.logLevel === "FATAL" || m === "released leadership" || m.startsWith("shutdown"))) return
    o.history.add(["leadership", `replica ${identity}`], `${identity}: ${m}${line.logLevel === "ERROR" ? ` ${JSON.stringify(line.annotations).slice(0, 300)}` : ""}`, at)
  }

  const start = async (identity: string): Promise<ControllerProcess> => {
    const n = generations.filter((g) => g.identity === identity).length + 1
    const proc = await startController({
      kubeconfig: o.kubeconfig,
      namespace: POOLS_NAMESPACE,
      identity,
      script: o.script,
      nodeArgs: o.nodeArgs,
      env: o.env,
      logFile: path.join(o.logDir, `${identity}-${n}.log`),
      onLine: onLine(identity)
    })
    const gen: Generation = { identity, n, pid: proc.pid, startedAt: Date.now(), exitedAt: undefined, exit: undefined, endedBy: undefined }
    generations.push(gen)
    current.set(identity, { proc, gen })
    o.history.add([`replica ${identity}`, "leadership"], `${identity}: process ${n} started (pid ${proc.pid})`)
    void proc.exited.then((exit) => {
      gen.exitedAt = Date.now()
      gen.exit = exit
      // A process gone holds nothing: whatever it led or ran ends with it.
      close(leading, leaderships, identity, gen.exitedAt)
      close(acting, actings, identity, gen.exitedAt)
      o.history.add([`replica ${identity}`, "leadership"], `${identity}: process ${n} exited (${exit.signal ?? `code ${exit.code}`})${gen.endedBy === undefined ? " — not by the harness" : ""}`)
    })
    return proc
  }

  const sample = async () => {
    const round = await Promise.all(
      [...current.values()].map(async ({ proc, gen }) => {
        if (!proc.running()) return undefined
        const text = await proc.metrics()
        const m = parseProm(text)
        const value = (name: string) => (m.some((s) => s.name === name) ? sum(m, name) : undefined)
        if (m.length > 0) requests.set(proc.pid, delta([], m, "whereabouts_controller_api_requests_total", ["verb", "code"]))
        const leader = value("whereabouts_controller_leader")
        samples.push({
          t: Date.now(),
          identity: gen.identity,
          pid: proc.pid,
          rssBytes: rssOf(proc.pid),
          heapUsedBytes: value("nodejs_heap_size_used_bytes"),
          leader,
          queueDepth: value("whereabouts_controller_workqueue_depth"),
          inFlight: value("whereabouts_controller_workqueue_in_flight")
        })
        return leader
      })
    )
    if (round.filter((l) => l === 1).length > 1) bothLeading.push(Date.now())
  }

  /** The replica whose leader gauge reads 1 now (undefined: none, or none answers). */
  const leader = async (): Promise<string | undefined> => {
    for (const { proc, gen } of current.values()) if (proc.running() && (await proc.metric("whereabouts_controller_leader")) === 1) return gen.identity
    return undefined
  }

  /** The leader once one leads and `ready()` holds, polled every 500 ms; undefined after `limitMs`. */
  const awaitLeader = async (limitMs: number, ready = () => true): Promise<string | undefined> => {
    const deadline = Date.now() + limitMs
    for (;;) {
      const who = await leader()
      if (who !== undefined && ready()) return who
      if (Date.now() > deadline) return undefined
      await sleep(500)
    }
  }

  const signal = async (identity: string, how: "SIGKILL" | "SIGTERM" | "end of run"): Promise<Exit | undefined> => {
    const c = current.get(identity)
    if (c === undefined || !c.proc.running()) return c?.gen.exit
    c.gen.endedBy = how
    return how === "SIGKILL" ? c.proc.kill() : c.proc.stop(60_000)
  }

  return {
    start,
    signal,
    awaitLeader,
    sample,
    running: (identity: string) => current.get(identity)?.proc.running() === true,
    process: (identity: string) => current.get(identity)?.proc,
    generations: () => generations,
    samples: () => samples,
    /** Closed intervals, plus the open ones up to now. */
    intervals: (now = Date.now()) => ({
      leaderships: [...leaderships, ...[...leading].map(([who, from]) => ({ who, from, to: now }))],
      actings: [...actings, ...[...acting].map(([who, from]) => ({ who, from, to: now }))]
    }),
    /** Requests by `verb code`, summed over every process (each process's counters from its last scrape). */
    requests: (): Requests => {
      const total: Requests = {}
      for (const counts of requests.values()) for (const [k, v] of Object.entries(counts)) total[k] = (total[k] ?? 0) + v
      return total
    },
    bothLeading: () => bothLeading,
    /** Per running replica: whether it leads, and its own invariant monitor's gauge by kind (none on a standby). */
    invariantGauges: () =>
      Promise.all(
        [...current.values()]
          .filter(({ proc }) => proc.running())
          .map(async ({ proc, gen }) => {
            const m = parseProm(await proc.metrics())
            const kinds = Object.fromEntries(m.filter((s) => s.name === "whereabouts_controller_invariant_violations").map((s) => [s.labels["kind"] ?? "", s.value] as const))
            return { identity: gen.identity, leader: m.some((s) => s.name === "whereabouts_controller_leader" && s.value === 1), kinds }
          })
      ),
    /** Log lines of every process of every replica that contain `text` (from their log files). */
    grep: (text: string): ReadonlyArray<string> =>
      generations.flatMap((g) => {
        try {
          return fs
            .readFileSync(path.join(o.logDir, `${g.identity}-${g.n}.log`), "utf8")
            .split("\n")
            .filter((l) => l.includes(text))
            .map((l) => `${g.identity}#${g.n} ${l.slice(0, 400)}`)
        } catch {
          return []
        }
      }).slice(-20)
  }
}

export type Replicas = ReturnType<typeof startReplicas>
