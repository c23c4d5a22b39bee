/**
 * The per-object event log (also in `events.jsonl`): watch changes, workload steps and faults, each
 * under the keys of the objects it concerns (`ns/name`, `network ip`), so a violation comes with
 * the history of exactly its objects.
 */
import * as fs from "node:fs"

interface Line {
  /** ms since the epoch */
  readonly at: number
  readonly text: string
}

/** `network ip` (network "" for unnamed): the key of an address's history. */
export const addressKey = (network: string, ip: string): string => `${network === "" ? "(unnamed)" : network} ${ip}`

/** `mm:ss.mmm` of a time relative to the start of the run (negative: during the set-up). */
export const clock = (t: number): string => {
  const s = Math.abs(t) / 1000
  const m = Math.floor(s / 60)
  return `${t < 0 ? "-" : ""}${String(m).padStart(2, "0")}:${(s - m * 60).toFixed(3).padStart(6, "0")}`
}

export interface History {
  /** The start of the run (ms since the epoch); lines are rendered relative to it. */
  t0: number
  /** Appends one line under each key. */
  readonly add: (keys: ReadonlyArray<string>, text: string, at?: number) => void
  /** The last 80 lines of these keys, merged in time order, rendered `mm:ss.mmm text`. */
  readonly render: (keys: ReadonlyArray<string>) => ReadonlyArray<string>
  readonly close: () => void
}

export const makeHistory = (file: string, t0: number): History => {
  const byKey = new Map<string, Array<Line>>()
  const out = fs.createWriteStream(file)
  const history: History = {
    t0,
    add: (keys, text, at = Date.now()) => {
      const line = { at, text }
      for (const k of keys) {
        let lines = byKey.get(k)
        if (lines === undefined) byKey.set(k, (lines = []))
        lines.push(line)
      }
      out.write(`${JSON.stringify({ at, keys, text })}\n`)
    },
    render: (keys) => {
      const limit = 80
      const seen = new Set<Line>()
      const merged: Array<Line> = []
      for (const k of keys) for (const l of byKey.get(k) ?? []) if (!seen.has(l)) (seen.add(l), merged.push(l))
      merged.sort((a, b) => a.at - b.at)
      const shown = merged.length > limit ? merged.slice(-limit) : merged
      return [...(merged.length > limit ? [`(${merged.length - limit} earlier lines in events.jsonl)`] : []), ...shown.map((l) => `${clock(l.at - history.t0)} ${l.text}`)]
    },
    close: () => out.end()
  }
  return history
}
