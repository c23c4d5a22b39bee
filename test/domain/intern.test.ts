import * as v8 from "node:v8"
import * as vm from "node:vm"
import { describe, expect, it } from "vitest"
import { intern, internOptional } from "../../src/domain/intern.ts"

// Two equal strings built separately (as two JSON answers would give them).
const fresh = (s: string): string => (JSON.parse(JSON.stringify({ s })) as { s: string }).s

// A full collection, to compare what is live (the test process has no --expose-gc).
v8.setFlagsFromString("--expose-gc")
const gc = vm.runInNewContext("gc") as () => void
const liveHeap = () => {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

describe("intern", () => {
  it("returns an equal string for any input, index-like or empty included", () => {
    for (const s of ["default/web-0", "net1", "", "12345", "a/b/c", "ünïcode/pod"]) expect(intern(fresh(s))).toBe(s)
    expect(internOptional(undefined)).toBeUndefined()
    expect(internOptional(fresh("ns/p"))).toBe("ns/p")
  })

  it("keeps one copy of equal strings: 40k podrefs naming 100 pods hold the heap of 100", () => {
    const name = (i: number) => `namespace-${i % 10}/statefulset-pod-${i % 100}-0123456789abcdef`
    const base = liveHeap()
    let refs: Array<string> | undefined = Array.from({ length: 40_000 }, (_, i) => fresh(name(i)))
    const separate = liveHeap() - base
    const interned = refs.map(intern)
    refs = undefined
    const shared = liveHeap() - base
    expect(refs).toBeUndefined()
    // 40k strings of ~50 characters: over 2 MB apart; shared, the array's 320 kB and 100 strings.
    expect(separate).toBeGreaterThan(2_000_000)
    expect(shared).toBeLessThan(separate / 3)
    expect(interned.length).toBe(40_000)
    expect(interned[12_345]).toBe(name(12_345))
  })
})
