/**
 * Where a process's resident memory lives, from /proc/<pid>/smaps: V8's heap (the pointer
 * compression cage, one reservation of at least 1 GiB), glibc's main arena ([heap]), thread
 * arenas (anonymous 64 MiB-aligned reservations), other anonymous mappings, and files (the node
 * binary, shared libraries).
 */
import { execFileSync } from "node:child_process"
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

/**
 * Which parts of the node binary are resident in a process: its pages present in the process's
 * page table (/proc/<pid>/pagemap, root only) by ELF section, with ICU's data (the `icudt*_dat`
 * symbol, tens of MiB of .rodata that Intl touches page by page) counted on its own. Section and
 * symbol addresses come from readelf and nm (binutils); the binary must not be position-independent
 * (node's release builds are not), so its addresses are the mapped ones.
 */
export const binaryResidency = (pid: number): ReadonlyArray<{ readonly part: string; readonly rss: number }> => {
  const binary = fs.readlinkSync(`/proc/${pid}/exe`)
  const sections = execFileSync("readelf", ["-SW", binary], { encoding: "utf8" })
    .split("\n")
    .flatMap((line) => {
      const m = /^\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)/.exec(line)
      return m === null || Number.parseInt(m[2]!, 16) === 0 ? [] : [{ part: m[1]!, start: Number.parseInt(m[2]!, 16), size: Number.parseInt(m[3]!, 16) }]
    })
  const icu = execFileSync("nm", ["-S", binary], { encoding: "utf8", maxBuffer: 1 << 28 })
    .split("\n")
    .flatMap((line) => {
      const [address, size, , name] = line.split(" ")
      return name !== undefined && /^icudt\d+_dat$/.test(name) ? [{ part: `ICU data (${name})`, start: Number.parseInt(address!, 16), size: Number.parseInt(size!, 16) }] : []
    })
  const parts = [...icu, ...sections]
  const PAGE = 4096
  const counts = new Map<string, number>()
  const pagemap = fs.openSync(`/proc/${pid}/pagemap`, "r")
  try {
    for (const line of fs.readFileSync(`/proc/${pid}/maps`, "utf8").split("\n")) {
      if (!line.endsWith(binary)) continue
      const [lo, hi] = line.split(" ")[0]!.split("-").map((h) => Number.parseInt(h, 16)) as [number, number]
      // One 8-byte entry per page of the mapping, read at once; bit 63: present.
      const entries = Buffer.alloc(((hi - lo) / PAGE) * 8)
      fs.readSync(pagemap, entries, 0, entries.length, (lo / PAGE) * 8)
      for (let i = 0; i < entries.length; i += 8) {
        if ((entries.readBigUInt64LE(i) >> 63n) === 0n) continue
        const va = lo + (i / 8) * PAGE
        const part = parts.find((p) => va >= p.start && va < p.start + p.size)?.part ?? "other"
        counts.set(part, (counts.get(part) ?? 0) + PAGE)
      }
    }
  } finally {
    fs.closeSync(pagemap)
  }
  return [...counts].map(([part, rss]) => ({ part, rss })).sort((a, b) => b.rss - a.rss)
}
