/**
 * The faults, drawn from the seed like the workload: one every `everyMs` (±10 %), kinds dealt
 * from a shuffled deck of all of them so every kind comes up once per round, each with its own
 * parameters. A fault lasts at most 60 % of the interval, so one has ended before the next.
 */
import { rngOf } from "./rng.ts"

export const FAULT_KINDS = ["kill-leader", "term-leader", "apiserver-restart", "compaction", "stall", "drop", "throttle", "slow"] as const
export type FaultKind = (typeof FAULT_KINDS)[number]

/** A fault and its parameters (describeFault says what each does). */
type FaultSpec =
  | { readonly kind: "kill-leader"; readonly restartAfterMs: number }
  | { readonly kind: "term-leader"; readonly restartAfterMs: number }
  | { readonly kind: "apiserver-restart"; readonly downMs: number }
  | { readonly kind: "compaction"; readonly downMs: number }
  | { readonly kind: "stall"; readonly ms: number }
  | { readonly kind: "drop"; readonly ms: number }
  | { readonly kind: "throttle"; readonly ms: number; readonly share: number; readonly retryAfterSeconds: number }
  | { readonly kind: "slow"; readonly ms: number; readonly delayMs: number }

export interface PlannedFault {
  readonly at: number
  readonly spec: FaultSpec
}

/** The fault schedule of a run of `durationMs` (the last fault starts at least one interval before the end). */
export const planFaults = (seed: number, durationMs: number, everyMs: number, kinds: ReadonlyArray<FaultKind> = FAULT_KINDS): ReadonlyArray<PlannedFault> => {
  if (kinds.length === 0 || !Number.isFinite(everyMs) || everyMs <= 0) return []
  const rng = rngOf(seed, "faults")
  const cap = (ms: number) => Math.round(Math.min(ms, everyMs * 0.6))
  const out: Array<PlannedFault> = []
  let deck: Array<FaultKind> = []
  for (let t = everyMs * rng.between(0.9, 1.1); t < durationMs - everyMs * 0.5; t += everyMs * rng.between(0.9, 1.1)) {
    if (deck.length === 0) deck = rng.shuffle(kinds)
    const kind = deck.pop()!
    const spec: FaultSpec =
      kind === "kill-leader"
        ? { kind, restartAfterMs: Math.round(rng.between(2_000, 8_000)) }
        : kind === "term-leader"
          ? { kind, restartAfterMs: Math.round(rng.between(1_000, 4_000)) }
          : kind === "apiserver-restart" || kind === "compaction"
            ? { kind, downMs: Math.round(rng.between(1_000, 6_000)) }
            : kind === "stall"
              ? { kind, ms: cap(rng.between(10_000, 40_000)) }
              : kind === "drop"
                ? { kind, ms: cap(rng.between(3_000, 15_000)) }
                : kind === "throttle"
                  ? { kind, ms: cap(rng.between(15_000, 40_000)), share: Math.round(rng.between(0.6, 1) * 100) / 100, retryAfterSeconds: rng.pick([1, 2]) }
                  : { kind, ms: cap(rng.between(30_000, 60_000)), delayMs: Math.round(rng.between(300, 1_500)) }
    out.push({ at: Math.round(t), spec })
  }
  return out
}

/** One line: what the fault does (compaction: every watch resumes from a version that is gone). */
export const describeFault = (s: FaultSpec): string => {
  switch (s.kind) {
    case "kill-leader":
      return `SIGKILL the leader, restart it after ${(s.restartAfterMs / 1000).toFixed(1)} s`
    case "term-leader":
      return `SIGTERM the leader, restart it ${(s.restartAfterMs / 1000).toFixed(1)} s after it exited`
    case "apiserver-restart":
      return `restart kube-apiserver (down ${(s.downMs / 1000).toFixed(1)} s)`
    case "compaction":
      return `compact etcd, restart kube-apiserver (down ${(s.downMs / 1000).toFixed(1)} s): watches relist (410)`
    case "stall":
      return `proxy stalls every connection for ${(s.ms / 1000).toFixed(0)} s`
    case "drop":
      return `proxy resets every connection, and new ones for ${(s.ms / 1000).toFixed(0)} s`
    case "throttle":
      return `proxy answers ${Math.round(s.share * 100)} % of requests 429 (Retry-After: ${s.retryAfterSeconds}) for ${(s.ms / 1000).toFixed(0)} s`
    case "slow":
      return `proxy delays every request by ${s.delayMs} ms for ${(s.ms / 1000).toFixed(0)} s`
  }
}
