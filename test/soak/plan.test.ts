/**
 * The soak's plan and fault schedule: one seed, the same choices; what the plan promises the run
 * (a name's incarnations one after the other, pods only on nodes alive when they start, nothing
 * on the flex network while its NAD is deleted) holds for any seed.
 */
import { describe, expect, it } from "vitest"
import { FAULT_KINDS, planFaults } from "../../bench/soak/fault-plan.ts"
import { NETS } from "../../bench/soak/networks.ts"
import { parseOptions } from "../../bench/soak/options.ts"
import { makePlan, type PlanOptions } from "../../bench/soak/plan.ts"
import { rngOf } from "../../bench/soak/rng.ts"
import { pluginStdin } from "../live/support/upstream-plugin.ts"

const options = (seed: number): PlanOptions => ({
  seed,
  durationMs: 10 * 60_000,
  rate: 4,
  meanLifetimeMs: 30_000,
  delShare: 0.3,
  massEveryMs: 120_000,
  nodeDeathEveryMs: 90_000,
  nadEveryMs: 60_000
})

describe("rng", () => {
  it("is a function of seed and name", () => {
    const draw = (seed: number, name: string) => Array.from({ length: 5 }, rngOf(seed, name).next)
    expect(draw(1, "pods")).toEqual(draw(1, "pods"))
    expect(draw(1, "pods")).not.toEqual(draw(2, "pods"))
    expect(draw(1, "pods")).not.toEqual(draw(1, "faults"))
  })

  it("draws in range", () => {
    const r = rngOf(3, "x")
    for (let i = 0; i < 10_000; i++) {
      const v = r.next()
      expect(v >= 0 && v < 1).toBe(true)
      expect(r.int(7)).toBeLessThan(7)
    }
    expect(r.shuffle([1, 2, 3, 4, 5]).sort()).toEqual([1, 2, 3, 4, 5])
  })
})

describe("plan", () => {
  it("one seed, one plan; another seed, another", () => {
    expect(JSON.stringify(makePlan(options(5)))).toBe(JSON.stringify(makePlan(options(5))))
    expect(JSON.stringify(makePlan(options(5)).pods)).not.toBe(JSON.stringify(makePlan(options(6)).pods))
  })

  it.each([1, 2, 3, 42])("seed %i: a name's incarnations never overlap, pods start on live nodes, every kind of end occurs", (seed) => {
    const plan = makePlan(options(seed))
    const byName = new Map<string, Array<{ at: number; end: number }>>()
    for (const p of plan.pods) byName.set(`${p.namespace}/${p.name}`, [...(byName.get(`${p.namespace}/${p.name}`) ?? []), { at: p.at, end: p.end.at }])
    for (const lives of byName.values()) {
      for (let i = 1; i < lives.length; i++) expect(lives[i]!.at).toBeGreaterThanOrEqual(lives[i - 1]!.end)
    }
    const dead = new Map(plan.nodeDeaths.map((d) => [d.node, d.at] as const))
    const born = new Map(plan.nodeDeaths.map((d) => [d.replacement.node, d.replacement.at] as const))
    for (const p of plan.pods) {
      expect(p.at).toBeLessThan(dead.get(p.node) ?? Number.POSITIVE_INFINITY)
      expect(p.at).toBeGreaterThanOrEqual(born.get(p.node) ?? 0)
    }
    for (const d of plan.nodeDeaths) for (const id of d.pods) expect(plan.pods.find((p) => p.id === id)!.end).toEqual({ at: d.at, how: "node" })
    const ends = new Set(plan.pods.map((p) => p.end.how))
    for (const how of ["del", "leak", "leak-graceful", "rebirth"]) expect(ends).toContain(how)
    expect(new Set(plan.pods.map((p) => p.kind))).toEqual(new Set(["plain", "job", "sts", "bad"]))
    expect(plan.massDeletions.every((m) => m.pods.length > 0)).toBe(true)
  })

  it("no pod is given the flex network while its NAD is deleted", () => {
    const plan = makePlan(options(9))
    const flex = NETS.find((n) => n.mutable === true)!.key
    const deletions = plan.nadOps.flatMap((o) => (o.kind === "delete" ? [[o.at, o.recreateAt] as const] : []))
    expect(deletions.length).toBeGreaterThan(0)
    for (const p of plan.pods) {
      if (!p.nets.some((a) => a.net === flex)) continue
      for (const [from, to] of deletions) expect(p.at < from - 2_000 || p.at >= to + 2_000).toBe(true)
    }
  })
})

describe("fault schedule", () => {
  it("deals every kind once per round, from the seed", () => {
    const faults = planFaults(11, 60 * 60_000, 120_000)
    expect(faults).toEqual(planFaults(11, 60 * 60_000, 120_000))
    expect(faults.length).toBeGreaterThanOrEqual(27)
    expect(new Set(faults.slice(0, FAULT_KINDS.length).map((f) => f.spec.kind))).toEqual(new Set(FAULT_KINDS))
    for (let i = 1; i < faults.length; i++) expect(faults[i]!.at - faults[i - 1]!.at).toBeGreaterThanOrEqual(108_000)
  })

  it("keeps each fault within 60 % of the interval, and can be switched off", () => {
    for (const f of planFaults(3, 10 * 60_000, 30_000)) if ("ms" in f.spec) expect(f.spec.ms).toBeLessThanOrEqual(18_000)
    expect(planFaults(3, 10 * 60_000, 0)).toEqual([])
    expect(new Set(planFaults(3, 10 * 60_000, 30_000, ["stall"]).map((f) => f.spec.kind))).toEqual(new Set(["stall"]))
  })
})

describe("options", () => {
  it("publishes under the block asked for, and refuses one BENCHMARKS.md does not have", () => {
    const parsed = (argv: ReadonlyArray<string>) => {
      const o = parseOptions(argv)
      if (o === "help") throw new Error("help")
      return o
    }
    expect(parsed([]).publishAs).toBeUndefined()
    expect(parsed(["--publish"]).publishAs).toBe("soak")
    expect(parsed(["--publish-as", "soak-steady"]).publishAs).toBe("soak-steady")
    expect(() => parsed(["--publish-as", "soak-2"])).toThrow(/--publish-as soak-2: expected one of soak, soak-steady/)
    expect(() => parsed(["--seed", "0.5"])).toThrow(/whole number/)
  })

  it("gives the plugin the node's IPAM settings without overriding what the NAD says", () => {
    const nad = JSON.stringify({ cniVersion: "0.3.1", name: "v4", type: "macvlan", ipam: { type: "whereabouts", range: "10.50.0.0/20", leader_lease_duration: 2000 } })
    const out = JSON.parse(pluginStdin(nad, "/node/whereabouts.conf", { leader_retry_period: 100, leader_lease_duration: 1500 })) as { ipam: Record<string, unknown> }
    expect(out.ipam).toEqual({ type: "whereabouts", range: "10.50.0.0/20", leader_lease_duration: 2000, leader_retry_period: 100, configuration_path: "/node/whereabouts.conf" })
    expect(pluginStdin(nad, "/node/whereabouts.conf", {})).toBe(pluginStdin(nad, "/node/whereabouts.conf"))
    expect(() => pluginStdin('{"name": ', "/node/whereabouts.conf", { leader_retry_period: 100 })).toThrow()
  })
})
