/**
 * Runs the fault schedule (fault-plan.ts) and keeps its timeline. A fault's window lasts until the
 * fault is lifted and a replica leads again, plus a settling time.
 */
import { Effect } from "effect"
import { setTimeout as sleep } from "node:timers/promises"
import type { ControlPlane } from "../../test/live/cluster.ts"
import { compactAll } from "../../test/live/support/etcd.ts"
import { describeFault, type PlannedFault } from "./fault-plan.ts"
import type { History } from "./history.ts"
import type { Window } from "./obligations.ts"
import type { ChaosProxy } from "./proxy.ts"
import type { Replicas } from "./replicas.ts"
import { rngOf } from "./rng.ts"

/** After recovery, how long a window still counts: informers re-watching, queued retries landing. */
export const SETTLE_MS = 5_000
const RECOVERY_LIMIT_MS = 120_000

export interface FaultRecord {
  readonly planned: PlannedFault
  readonly description: string
  readonly start: number
  /** When a replica led again after it. */
  recoveredAt: number | undefined
  readonly notes: Array<string>
}

interface FaultDeps {
  readonly seed: number
  readonly history: History
  readonly proxy: ChaosProxy
  readonly replicas: Replicas
  readonly plane: ControlPlane
  readonly etcd: string
}

export const makeFaults = (deps: FaultDeps) => {
  const records: Array<FaultRecord> = []
  const throttleRandom = rngOf(deps.seed, "throttle").next
  const note = (r: FaultRecord, text: string) => {
    r.notes.push(text)
    deps.history.add(["faults"], `fault ${records.indexOf(r) + 1} (${r.planned.spec.kind}): ${text}`)
  }

  const inject = async (r: FaultRecord): Promise<void> => {
    const s = r.planned.spec
    switch (s.kind) {
      case "kill-leader":
      case "term-leader": {
        const victim = await deps.replicas.awaitLeader(30_000)
        if (victim === undefined) return note(r, "no replica leads: nothing to signal")
        const exit = await deps.replicas.signal(victim, s.kind === "kill-leader" ? "SIGKILL" : "SIGTERM")
        note(r, `${victim} ${s.kind === "kill-leader" ? "SIGKILLed" : "SIGTERMed"}, exited with ${exit?.signal ?? `code ${exit?.code}`}`)
        await sleep(s.restartAfterMs)
        await deps.replicas.start(victim)
        return note(r, `${victim} started again`)
      }
      case "compaction":
      case "apiserver-restart":
        // Only a restarted API server's watch cache forgets the versions etcd compacted away.
        if (s.kind === "compaction") note(r, `etcd compacted at revision ${await compactAll(deps.etcd)}`)
        await deps.plane.stopApiServer()
        await sleep(s.downMs)
        return deps.plane.startApiServer()
      case "stall":
        return deps.proxy.stall(s.ms)
      case "drop":
        return deps.proxy.drop(s.ms)
      case "throttle":
        return deps.proxy.throttle(s.ms, s.share, s.retryAfterSeconds, throttleRandom)
      case "slow":
        return deps.proxy.slow(s.ms, s.delayMs)
    }
  }

  /** Runs every planned fault at its time from `t0` (a fault waits for the one before it to recover); none starts after `stopAt`. */
  const run = (plan: ReadonlyArray<PlannedFault>, t0: number, stopAt: number) =>
    Effect.promise(async () => {
    for (const planned of plan) {
      const due = t0 + planned.at
      if (due > stopAt) break
      await sleep(Math.max(0, due - Date.now()))
      const r: FaultRecord = { planned, description: describeFault(planned.spec), start: Date.now(), recoveredAt: undefined, notes: [] }
      records.push(r)
      deps.history.add(["faults"], `fault ${records.length} begins: ${r.description}`)
      try {
        await inject(r)
      } catch (e) {
        note(r, `injecting failed: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`)
      }
      const leader = await deps.replicas.awaitLeader(RECOVERY_LIMIT_MS)
      r.recoveredAt = Date.now()
      note(r, leader === undefined ? `no replica led within ${RECOVERY_LIMIT_MS / 1000} s of the fault's end` : `recovered: ${leader} leads, ${((r.recoveredAt - r.start) / 1000).toFixed(1)} s after the start`)
    }
  })

  const windows = (): ReadonlyArray<Window> => records.map((r) => ({ start: r.start, end: r.recoveredAt === undefined ? undefined : r.recoveredAt + SETTLE_MS }))
  return {
    records: () => records,
    run,
    windows,
    /** Whether [from, to] meets a window. */
    inWindow: (from: number, to: number): boolean => windows().some((w) => w.start <= to && (w.end ?? Number.POSITIVE_INFINITY) >= from)
  }
}

export type Faults = ReturnType<typeof makeFaults>
