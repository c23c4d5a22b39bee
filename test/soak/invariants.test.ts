/**
 * The soak checker's judgement on hand-made views: what counts as a live pod losing its address,
 * a missing reservation, an address held twice; when an obligation is overdue (its bound, pushed
 * past fault windows; stopped while a namesake starts); the two-leaders interval check; the RSS fit.
 */
import { describe, expect, it } from "vitest"
import { type PodView, canonicalIP, mustHold, overlapping, poolView, problemsOf, reservationView, statusAddresses } from "../../bench/soak/invariants.ts"
import { deadlineOf, makeObligations } from "../../bench/soak/obligations.ts"
import { floorFit, rssFit } from "../../bench/soak/report.ts"
import type { Generation, Sample } from "../../bench/soak/replicas.ts"

const status = (entries: ReadonlyArray<{ name: string; ips: ReadonlyArray<string> }>) =>
  JSON.stringify([{ name: "cluster-network", interface: "eth0", ips: ["10.244.0.10"], default: true }, ...entries.map((e, i) => ({ ...e, interface: `net${i + 1}` }))])

const pod = (ref: string, s: string | undefined, over: Partial<PodView> = {}): PodView => ({ ref, uid: `uid-${ref}`, phase: "Running", node: "n", deletionAt: undefined, evictedByTaintManager: false, status: s, ...over })

const pool = (name: string, range: string, allocations: Record<string, { id: string; podref: string }>) => poolView({ metadata: { name }, spec: { range, allocations } })

const view = (pods: ReadonlyArray<PodView>, pools: ReadonlyArray<ReturnType<typeof pool>>, reservations: Record<string, string>) =>
  problemsOf({ pods, pools, reservations: new Map(Object.entries(reservations).map(([name, podref]) => reservationView({ metadata: { name }, spec: { podref } }))), known: () => undefined })

describe("problemsOf", () => {
  const v4 = pool("10.50.0.0-20", "10.50.0.0/20", { "1": { id: "c1", podref: "soak-a/a" }, "2": { id: "c2", podref: "soak-a/b" } })
  const healthy = [pod("soak-a/a", status([{ name: "soak-a/v4", ips: ["10.50.0.1"] }])), pod("soak-a/b", status([{ name: "soak-a/v4", ips: ["10.50.0.2"] }]))]

  it("a clean view has no problem", () => {
    expect(view(healthy, [v4], { "10.50.0.1": "soak-a/a", "10.50.0.2": "soak-a/b" })).toEqual([])
  })

  it("a running pod whose address its pool does not hold, or whose reservation is gone", () => {
    const freed = pool("10.50.0.0-20", "10.50.0.0/20", { "2": { id: "c2", podref: "soak-a/b" } })
    expect(view(healthy, [freed], { "10.50.0.2": "soak-a/b" }).map((p) => `${p.kind} ${p.pods.join(",")} ${p.ip}`)).toEqual([
      "live-not-held soak-a/a 10.50.0.1",
      "reservation-missing soak-a/a 10.50.0.1"
    ])
  })

  it("pods that do not run, or terminate, are not held to it; a named network looks in its own pools and reservation names", () => {
    const terminating = pod("soak-a/a", status([{ name: "soak-a/v4", ips: ["10.50.0.1"] }]), { deletionAt: 1 })
    const pending = pod("soak-a/b", status([{ name: "soak-a/v4", ips: ["10.50.0.2"] }]), { phase: "Pending" })
    expect(view([terminating, pending], [], {})).toEqual([])
    const blue = pod("soak-b/x", status([{ name: "soak-b/blue", ips: ["10.50.0.1"] }]))
    // The unnamed pool's 10.50.0.1 is a's, not x's: x's must be in blue's pool and reservation.
    expect(view([blue], [v4], { "10.50.0.1": "soak-a/a" }).map((p) => p.kind)).toEqual(["live-not-held", "reservation-missing"])
    const bluePool = pool("blue-10.50.0.0-20", "10.50.0.0/20", { "1": { id: "c9", podref: "soak-b/x" } })
    expect(view([blue], [v4, bluePool], { "blue-10.50.0.1": "soak-b/x" })).toEqual([])
  })

  it("a terminating pod keeps its addresses until it qualifies as never running again, unless the kubelet began its CNI DEL", () => {
    const terminating = pod("soak-a/a", status([{ name: "soak-a/v4", ips: ["10.50.0.1"] }]), { deletionAt: 1 })
    const freed = pool("10.50.0.0-20", "10.50.0.0/20", {})
    const judged = (qualifiesAt: number | undefined, delStarted: boolean) =>
      problemsOf({ pods: [terminating], pools: [freed], reservations: new Map(), known: () => undefined, mustHold: (p) => mustHold(p, 100, () => qualifiesAt, () => delStarted) }).map((p) => p.kind)
    expect(judged(undefined, false)).toEqual(["live-not-held", "reservation-missing"])
    expect(judged(101, false)).toEqual(["live-not-held", "reservation-missing"])
    expect(judged(100, false)).toEqual([])
    expect(judged(undefined, true)).toEqual([])
    expect(mustHold(pod("soak-a/b", undefined, { phase: "Succeeded", deletionAt: 1 }), 100, () => undefined, () => false)).toBe(false)
  })

  it("one address held twice in a network: two entries of pods that exist, or two live pods listing it", () => {
    const wider = pool("10.50.0.0-19", "10.50.0.0/19", { "1": { id: "c7", podref: "soak-a/c" } })
    const existing = ["soak-a/a", "soak-a/b", "soak-a/c"].map((ref) => pod(ref, undefined, { phase: "Pending" }))
    expect(problemsOf({ pods: existing, pools: [v4, wider], reservations: new Map(), known: () => undefined }).map((p) => `${p.kind} ${p.ip} ${p.pods.join(",")}`)).toEqual([
      "held-twice 10.50.0.1 soak-a/a,soak-a/c"
    ])
    // A gone pod's entry under a live pod's address (an overlapping range handed it out once the reservation went): the bound's business.
    const stale = pool("10.50.0.0-19", "10.50.0.0/19", { "1": { id: "c7", podref: "soak-a/gone" } })
    expect(problemsOf({ pods: existing, pools: [v4, stale], reservations: new Map(), known: () => undefined })).toEqual([])
    const twins = [pod("soak-a/a", status([{ name: "soak-a/v4", ips: ["10.50.0.1"] }])), pod("soak-a/c", status([{ name: "soak-a/v4", ips: ["10.50.0.1"] }]))]
    expect(view(twins, [v4], { "10.50.0.1": "soak-a/a" }).map((p) => p.kind)).toContain("held-twice")
  })

  it("an unreadable status falls back to what the kubelet knows", () => {
    expect(statusAddresses("[{not json")).toBeUndefined()
    expect(statusAddresses('{"name": 5}')).toBeUndefined()
    const broken = pod("soak-a/a", "[{not json")
    const known = () => [{ net: "soak-a/v4", network: "", ips: ["10.50.0.1"] }]
    expect(problemsOf({ pods: [broken], pools: [], reservations: new Map(), known }).map((p) => p.kind)).toEqual(["live-not-held", "reservation-missing"])
  })

  it("IPv6 spellings compare by value; pool offsets count from the range's address", () => {
    expect(canonicalIP("fd00:50:0:0:0:0:0:2")).toBe("fd00:50::2")
    const v6 = pool("fd00-50---112", "fd00:50::/112", { "2": { id: "c", podref: "soak-a/a" } })
    expect([...v6.entries.keys()]).toEqual(["fd00:50::2"])
    expect(view([pod("soak-a/a", status([{ name: "soak-a/v6", ips: ["fd00:50:0:0::2"] }]))], [v6], { "fd00-50--2": "soak-a/a" })).toEqual([])
  })
})

describe("obligations", () => {
  it("a deadline is pushed past every fault window that starts before it", () => {
    expect(deadlineOf(0, 60, [])).toBe(60)
    expect(deadlineOf(0, 60, [{ start: 50, end: 100 }])).toBe(160)
    expect(deadlineOf(0, 60, [{ start: 50, end: 100 }, { start: 150, end: 200 }])).toBe(260)
    expect(deadlineOf(0, 60, [{ start: 61, end: 100 }])).toBe(60)
    expect(deadlineOf(0, 60, [{ start: 10, end: undefined }])).toBe(Number.POSITIVE_INFINITY)
  })

  it("met when every item is gone; a sample of its latency; overdue after the bound", () => {
    const o = makeObligations(60, () => [])
    const items = [
      { kind: "entry" as const, object: "p", network: "", ip: "10.0.0.1" },
      { kind: "reservation" as const, object: "10.0.0.1", network: "", ip: "10.0.0.1" }
    ]
    o.open("ns/a", "u1", "deleted", 1_000, items)
    o.open("ns/b", "u2", "deleted", 1_000, [items[0]!])
    o.removed("ns/a", items[0]!, 1_010)
    expect(o.samples()).toEqual([])
    o.removed("ns/a", items[1]!, 1_020)
    expect(o.samples().map((s) => s.latencyMs)).toEqual([20])
    expect(o.overdue(1_050, () => undefined)).toEqual([])
    expect(o.overdue(1_061, () => undefined).map((x) => x.ref)).toEqual(["ns/b"])
  })

  it("a namesake that does not run yet stops the clock; one that runs and lists the address takes it over (no sample)", () => {
    const o = makeObligations(60, () => [])
    const item = { kind: "entry" as const, object: "p", network: "", ip: "10.0.0.1" }
    o.open("ns/db-0", "old", "deleted", 0, [item])
    const starting = pod("ns/db-0", undefined, { uid: "new", phase: "Pending" })
    expect(o.overdue(100, () => ({ pod: starting, attached: [] }))).toEqual([])
    expect(o.overdue(150, () => undefined)).toEqual([])
    expect(o.overdue(161, () => undefined).length).toBe(1)
    const running = pod("ns/db-0", undefined, { uid: "new" })
    expect(o.overdue(200, () => ({ pod: running, attached: [{ net: "ns/tiny", network: "", ips: ["10.0.0.1"] }] }))).toEqual([])
    expect(o.has("ns/db-0", "old")).toBe(false)
    expect(o.samples()).toEqual([])
  })
})

describe("two leaders", () => {
  it("flags overlapping intervals of different holders only", () => {
    expect(overlapping([{ who: "a", from: 0, to: 10 }, { who: "b", from: 10, to: 20 }, { who: "a", from: 20, to: 30 }])).toEqual([])
    expect(overlapping([{ who: "a", from: 0, to: 10 }, { who: "a", from: 5, to: 20 }])).toEqual([])
    expect(overlapping([{ who: "a", from: 0, to: 10 }, { who: "b", from: 8, to: 20 }]).length).toBe(1)
  })
})

describe("rssFit", () => {
  const gen = (identity: string, pid: number, startedAt: number): Generation => ({ identity, n: pid, pid, startedAt, exitedAt: undefined, exit: undefined, endedBy: undefined })
  const sample = (identity: string, pid: number, t: number, mib: number, heapMiB?: number): Sample => ({
    t,
    identity,
    pid,
    rssBytes: mib * 2 ** 20,
    heapUsedBytes: heapMiB === undefined ? undefined : heapMiB * 2 ** 20,
    leader: 1,
    queueDepth: 0,
    inFlight: 0
  })

  it("one slope across restarts, each process with its own level, warm-up left out", () => {
    const hour = 3_600_000
    const samples = [
      ...[0, 1, 2, 3, 4].map((i) => sample("a", 1, (i * hour) / 4, i === 0 ? 500 : 100 + i * 2.5)),
      ...[0, 1, 2, 3, 4].map((i) => sample("a", 2, 2 * hour + (i * hour) / 4, i === 0 ? 900 : 40 + i * 2.5))
    ]
    const fit = rssFit(samples, [gen("a", 1, 0), gen("a", 2, 2 * hour)], "a", hour / 8)
    expect(fit?.slope).toBeCloseTo(10, 6)
    expect(fit?.samples).toBe(8)
    expect(rssFit(samples, [gen("a", 1, 0)], "b", 0)).toBeUndefined()
  })

  it("floorFit: a saw-tooth of bursts over a slowly rising floor reads the floor's slope, where every sample reads where the run stopped in the tooth", () => {
    const minute = 60_000
    const period = 5 * minute
    // The floor rises 2 MiB/h; each 5-minute burst ramps 60 MiB above it and is given back; the run stops 3 minutes into a tooth.
    const samples = Array.from({ length: (33 * minute) / 10_000 }, (_, i) => {
      const t = i * 10_000
      return sample("a", 1, t, 100 + (2 * t) / 3_600_000 + (60 * (t % period)) / period)
    })
    const floor = floorFit(samples, [gen("a", 1, 0)], "a", 0, period)
    expect(floor?.slope).toBeCloseTo(2, 6)
    // Six whole windows; the seventh (3 minutes) is partial and left out. Every sample: over 3× the floor's slope.
    expect(floor?.samples).toBe(6)
    expect(rssFit(samples, [gen("a", 1, 0)], "a", 0)!.slope).toBeGreaterThan(6)
    // A process with fewer than three whole windows after warm-up gives no floor.
    expect(floorFit(samples.filter((x) => x.t < 14 * minute), [gen("a", 1, 0)], "a", 0, period)).toBeUndefined()
  })

  it("floorFit of the heap in use: follows what each collection kept, skips failed scrapes, and tells a leak from RSS held at a level", () => {
    const minute = 60_000
    const period = 5 * minute
    const heap = (s: Sample) => s.heapUsedBytes
    // RSS steps up once and stays (memory kept, nothing given back); the heap's floor is flat under a 30 MiB saw-tooth.
    const kept = Array.from({ length: (40 * minute) / 10_000 }, (_, i) => {
      const t = i * 10_000
      return sample("a", 1, t, t < 12 * minute ? 120 : 155, i % 7 === 3 ? undefined : 40 + (30 * (t % minute)) / minute)
    })
    expect(floorFit(kept, [gen("a", 1, 0)], "a", 0, period)!.slope).toBeGreaterThan(30)
    expect(floorFit(kept, [gen("a", 1, 0)], "a", 0, period, heap)!.slope).toBeCloseTo(0, 6)
    // A leak: the heap's floor rises 3 MiB/h, whatever RSS does.
    const leak = kept.map((s) => (s.heapUsedBytes === undefined ? s : { ...s, heapUsedBytes: s.heapUsedBytes + ((3 * s.t) / 3_600_000) * 2 ** 20 }))
    expect(floorFit(leak, [gen("a", 1, 0)], "a", 0, period, heap)!.slope).toBeCloseTo(3, 1)
    // No heap readings at all (the process never answered a scrape): no fit.
    expect(floorFit(kept.map((s) => ({ ...s, heapUsedBytes: undefined })), [gen("a", 1, 0)], "a", 0, period, heap)).toBeUndefined()
  })
})
