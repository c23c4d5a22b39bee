/**
 * Summarises a V8 .heapsnapshot (self sizes by node type and by constructor), the evidence for
 * memory findings in BENCHMARKS.md:  node bench/lib/heapsnapshot.ts <file> [top]
 */
import * as fs from "node:fs"

interface Snapshot {
  readonly snapshot: { readonly meta: { readonly node_fields: ReadonlyArray<string>; readonly node_types: ReadonlyArray<ReadonlyArray<string> | string> } }
  readonly nodes: ReadonlyArray<number>
  readonly strings: ReadonlyArray<string>
}

export interface HeapSummary {
  readonly total: number
  readonly byType: ReadonlyArray<{ readonly type: string; readonly bytes: number; readonly count: number }>
  readonly byName: ReadonlyArray<{ readonly name: string; readonly bytes: number; readonly count: number }>
  /** Strings by what they look like (the snapshot records a string's text as its name). */
  readonly byStringKind: ReadonlyArray<{ readonly kind: string; readonly bytes: number; readonly count: number }>
}

const stringKind = (text: string, size: number): string =>
  /^[0-9a-f]{64}$/.test(text) ? "64-hex (container ids)"
    : /^\[\s*\{/.test(text) ? "JSON array of objects (Multus annotations)"
    : /^[0-9]+$/.test(text) ? "decimal (resource versions, offsets)"
    : /^[0-9.:a-f]+$/.test(text) && /[.:]/.test(text) ? "IP addresses"
    : /^[a-z0-9][a-z0-9.-]*\/[a-z0-9][a-z0-9.-]*$/.test(text) ? "namespace/name (podrefs)"
    : /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(text) ? "UIDs"
    : size >= 4096 ? "4 KiB or more (module sources)"
    : "other"

export const summarizeHeap = (file: string, top = 25): HeapSummary => {
  const s = JSON.parse(fs.readFileSync(file, "utf8")) as Snapshot
  const fields = s.snapshot.meta.node_fields
  const types = s.snapshot.meta.node_types[0] as ReadonlyArray<string>
  const width = fields.length
  const [iType, iName, iSize] = [fields.indexOf("type"), fields.indexOf("name"), fields.indexOf("self_size")]
  const byType = new Map<string, { bytes: number; count: number }>()
  const byName = new Map<string, { bytes: number; count: number }>()
  const byStringKind = new Map<string, { bytes: number; count: number }>()
  let total = 0
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType]!]!
    const size = s.nodes[i + iSize]!
    total += size
    const t = byType.get(type) ?? { bytes: 0, count: 0 }
    t.bytes += size
    t.count++
    byType.set(type, t)
    const name = type === "object" || type === "closure" ? `${type}:${s.strings[s.nodes[i + iName]!]}` : type === "string" || type === "concatenated string" || type === "sliced string" ? "(strings)" : `(${type}) ${String(s.strings[s.nodes[i + iName]!]).slice(0, 40)}`
    const n = byName.get(name) ?? { bytes: 0, count: 0 }
    n.bytes += size
    n.count++
    byName.set(name, n)
    if (type === "string") {
      const kind = stringKind(String(s.strings[s.nodes[i + iName]!]), size)
      const k = byStringKind.get(kind) ?? { bytes: 0, count: 0 }
      k.bytes += size
      k.count++
      byStringKind.set(kind, k)
    }
  }
  const rank = <K extends string>(m: Map<string, { bytes: number; count: number }>, key: K) =>
    [...m].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top).map(([k, v]) => ({ [key]: k, ...v }) as { [P in K]: string } & { bytes: number; count: number })
  return { total, byType: rank(byType, "type"), byName: rank(byName, "name"), byStringKind: rank(byStringKind, "kind") }
}

if (process.argv[1]?.endsWith("heapsnapshot.ts") === true && process.argv[2] !== undefined) {
  const h = summarizeHeap(process.argv[2], Number(process.argv[3] ?? 25))
  const mb = (b: number) => `${(b / 2 ** 20).toFixed(1).padStart(7)} MiB`
  console.log(`total ${mb(h.total)}`)
  for (const t of h.byType) console.log(`${mb(t.bytes)} ${String(t.count).padStart(9)}  ${t.type}`)
  console.log("---")
  for (const n of h.byName) console.log(`${mb(n.bytes)} ${String(n.count).padStart(9)}  ${n.name}`)
  console.log("--- strings")
  for (const k of h.byStringKind) console.log(`${mb(k.bytes)} ${String(k.count).padStart(9)}  ${k.kind}`)
}
