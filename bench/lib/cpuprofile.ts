/** Summarises a V8 .cpuprofile: self time per function and per package, for BENCHMARKS.md evidence. */
import * as fs from "node:fs"

interface Node {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<Node>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
  readonly startTime: number
  readonly endTime: number
}

const where = (url: string): string => {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (m !== null) return m[1]!
  const s = /\/(src|bench|test)\/(.*)$/.exec(url)
  if (s !== null) return `${s[1]}/${s[2]}`
  return url === "" ? "(native)" : url.replace(/^node:/, "node:")
}

export interface ProfileSummary {
  readonly totalMs: number
  readonly idleMs: number
  readonly byFunction: ReadonlyArray<{ readonly fn: string; readonly ms: number; readonly pct: number }>
  readonly byPackage: ReadonlyArray<{ readonly pkg: string; readonly ms: number; readonly pct: number }>
  /** Inclusive time of frames whose function name matches, for targeted questions. */
  readonly inclusive: (pattern: RegExp) => number
}

export const summarize = (file: string, top = 20): ProfileSummary => {
  const p = JSON.parse(fs.readFileSync(file, "utf8")) as Profile
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const self = new Map<number, number>()
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000)
  const total = (p.endTime - p.startTime) / 1000
  let idle = 0
  const fnAcc = new Map<string, number>()
  const pkgAcc = new Map<string, number>()
  for (const [id, ms] of self) {
    const n = byId.get(id)!
    const name = n.callFrame.functionName || "(anonymous)"
    if (name === "(idle)" || name === "(program)" || name === "(garbage collector)") {
      if (name === "(idle)") idle += ms
      fnAcc.set(name, (fnAcc.get(name) ?? 0) + ms)
      pkgAcc.set(name, (pkgAcc.get(name) ?? 0) + ms)
      continue
    }
    const key = `${name} ${where(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`
    fnAcc.set(key, (fnAcc.get(key) ?? 0) + ms)
    const pkg = where(n.callFrame.url).split(":")[0]!
    pkgAcc.set(pkg, (pkgAcc.get(pkg) ?? 0) + ms)
  }
  const busy = total - idle
  const rank = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top)
  const inclusive = (pattern: RegExp) => {
    let acc = 0
    for (const [id, ms] of self) {
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
        if (pattern.test(byId.get(cur)!.callFrame.functionName)) {
          acc += ms
          break
        }
      }
    }
    return acc
  }
  return {
    totalMs: total,
    idleMs: idle,
    byFunction: rank(fnAcc).map(([fn, ms]) => ({ fn, ms, pct: (100 * ms) / Math.max(1, busy) })),
    byPackage: rank(pkgAcc).map(([pkg, ms]) => ({ pkg, ms, pct: (100 * ms) / Math.max(1, busy) })),
    inclusive
  }
}

if (process.argv[1]?.endsWith("cpuprofile.ts") === true && process.argv[2] !== undefined) {
  const s = summarize(process.argv[2], Number(process.argv[3] ?? 25))
  console.log(`total ${s.totalMs.toFixed(0)} ms, idle ${s.idleMs.toFixed(0)} ms, busy ${(s.totalMs - s.idleMs).toFixed(0)} ms`)
  for (const f of s.byPackage) console.log(`${f.ms.toFixed(0).padStart(8)} ms ${f.pct.toFixed(1).padStart(5)}%  ${f.pkg}`)
  console.log("---")
  for (const f of s.byFunction) console.log(`${f.ms.toFixed(0).padStart(8)} ms ${f.pct.toFixed(1).padStart(5)}%  ${f.fn}`)
}
