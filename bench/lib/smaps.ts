/**
 * Where a process's resident memory lives, from /proc/<pid>/smaps: V8's heap (the pointer
 * compression cage, one reservation of at least 1 GiB), glibc's main arena ([heap]), thread
 * arenas (anonymous 64 MiB-aligned reservations), other anonymous mappings, and files (the node
 * binary, shared libraries).
 */
import * as fs from "node:fs"

export interface SmapsSummary {
  readonly rss: number
  /** Resident bytes per kind of mapping, largest first. */
  readonly byKind: ReadonlyArray<{ readonly kind: string; readonly rss: number; readonly mappings: number }>
}

const GiB = 2 ** 30
const MiB64 = 64 * 2 ** 20
const KiB256 = 256 * 1024

export const smapsSummary = (pid: number): SmapsSummary => {
  const text = fs.readFileSync(`/proc/${pid}/smaps`, "utf8")
  const kinds = new Map<string, { rss: number; mappings: number }>()
  let kind = ""
  let total = 0
  for (const line of text.split("\n")) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (header !== null) {
      const start = Number.parseInt(header[1]!, 16)
      const size = Number.parseInt(header[2]!, 16) - start
      const name = header[3]!.trim()
      kind =
        name === "[heap]" ? "malloc main arena ([heap])"
          : name.startsWith("[") ? name
          : name !== "" ? (name.includes("/node") ? "node binary" : "other files")
          : size >= GiB ? "anonymous >= 1 GiB"
          : start % MiB64 === 0 ? "anonymous, 64 MiB-aligned (malloc thread arenas)"
          : size % KiB256 === 0 ? "anonymous, 256 KiB multiples (V8 pages, large mallocs)"
          : "anonymous, other"
      const k = kinds.get(kind) ?? { rss: 0, mappings: 0 }
      k.mappings++
      kinds.set(kind, k)
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss !== null) {
      const bytes = Number(rss[1]) * 1024
      kinds.get(kind)!.rss += bytes
      total += bytes
    }
  }
  return { rss: total, byKind: [...kinds].map(([k, v]) => ({ kind: k, ...v })).sort((a, b) => b.rss - a.rss) }
}
