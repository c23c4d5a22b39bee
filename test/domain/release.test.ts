import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { formatIP } from "../../src/domain/ip.ts"
import type { ReservationOrphanReason } from "../../src/domain/orphans.ts"
import { type PodProjection, podHoldsIP } from "../../src/domain/pod.ts"
import type { PoolEntry } from "../../src/domain/pool.ts"
import {
  type Claim,
  type HeldEntry,
  type HeldReservation,
  type Holding,
  Outcome,
  ReleaseError,
  entriesByPool,
  nextStep,
  planRelease,
  recheckTargets
} from "../../src/domain/release.ts"
import { ip } from "./helpers.ts"

const entry = (pool: string, key: string, address: string, podref: string, ifname: string | undefined = "net1", id = `c-${podref}`): HeldEntry => ({
  pool,
  entry: { key, ip: ip(address), id, podref, ifname } satisfies PoolEntry,
  network: "net1",
  reservation: address
})
const reservation = (name: string, extra: Partial<HeldReservation> = {}): HeldReservation => ({ name, listed: undefined, ip: ip(name), orphan: undefined, ...extra })

const holding = (podref: string, claim: Claim, entries: ReadonlyArray<HeldEntry>, reservations: ReadonlyArray<HeldReservation>, extra: Partial<Holding> = {}): Holding => {
  const [namespace, name] = podref.split("/") as [string, string]
  return { podref, pod: { namespace, name, uid: "old" }, claim, trigger: claim === "Deleted" ? "deletion" : "sweep", entries, reservations, problems: [], ifFreed: [], error: undefined, ...extra }
}

/** A live pod whose network-status lists these IPs on net1. */
const livePod = (podref: string, ips: ReadonlyArray<string>, extra: Partial<PodProjection> = {}): PodProjection => {
  const [namespace, name] = podref.split("/") as [string, string]
  const networkStatus = JSON.stringify([
    { name: "cluster", interface: "eth0", ips: ["10.244.0.9"], default: true },
    { name: `${namespace}/net1`, interface: "net1", ips }
  ])
  return { namespace, name, uid: "new", phase: "Running", networkStatus, ...extra }
}

const planned = (h: Holding, live: ReadonlyMap<string, PodProjection>) => {
  const [o] = planRelease([h], { live: live }).owners
  return {
    decision: o!.decision,
    entries: o!.entries.map((p) => formatIP(p.held.entry.ip)),
    reservations: o!.reservations.map((r) => r.name),
    kept: o!.kept.map((k) => `${k.what}: ${k.why}`)
  }
}

describe("planRelease: a deleted pod", () => {
  const dead = holding("ns/web-0", "Deleted", [entry("p", "1", "10.0.0.1", "ns/web-0")], [reservation("10.0.0.1")])

  it("gone at the re-check: its entries and reservations, each entry with its Normal Event", () => {
    const [o] = planRelease([dead], { live: new Map() }).owners
    expect(o!.decision).toBe("release")
    expect(o!.entries.map((p) => p.event)).toEqual([
      { regarding: { kind: "Pod", namespace: "ns", name: "web-0", uid: "old" }, type: "Normal", reason: "IPAddressGarbageCollected", message: "successful cleanup of IP address [10.0.0.1] from network net1" }
    ])
    expect(o!.reservations.map((r) => r.name)).toEqual(["10.0.0.1"])
  })

  it("a namesake exists (reborn, or still terminating): everything kept, and why", () => {
    expect(planned(dead, new Map([["ns/web-0", livePod("ns/web-0", [])]]))).toEqual({
      decision: "kept",
      entries: [],
      reservations: [],
      kept: ["p 10.0.0.1: pod ns/web-0 exists again (uid new) and holds these addresses", "reservation 10.0.0.1: pod ns/web-0 exists again (uid new) and holds these addresses"]
    })
  })

  it("held nothing: nothing to do, and no re-check needed", () => {
    const empty = holding("ns/x", "Deleted", [], [])
    expect(planned(empty, new Map()).decision).toBe("nothing")
    expect(recheckTargets([empty, dead]).map((h) => h.podref)).toEqual(["ns/web-0"])
  })

  it("bad input: failed, nothing planned, not re-checked", () => {
    const error = new ReleaseError({ reason: "BadAnnotation", pod: "ns/web-0", retryable: false, detail: "x" })
    const bad = { ...dead, error }
    expect(planned(bad, new Map()).decision).toBe("failed")
    expect(recheckTargets([bad])).toEqual([])
  })
})

describe("planRelease: the sweep's orphans", () => {
  it("each entry on its own: the one the live pod lists stays, the other goes", () => {
    const h = holding("ns/p", "Orphan", [entry("p", "4", "10.0.0.4", "ns/p"), entry("p", "5", "10.0.0.5", "ns/p")], [])
    expect(planned(h, new Map([["ns/p", livePod("ns/p", ["10.0.0.5"])]]))).toMatchObject({ decision: "release", entries: ["10.0.0.4"], kept: ["p 10.0.0.5: the live pod (uid new) may hold it"] })
  })

  it("a pending pod, or one whose status is unreadable, keeps everything", () => {
    const h = holding("ns/p", "Orphan", [entry("p", "4", "10.0.0.4", "ns/p")], [reservation("10.0.0.4", { orphan: "IPNotOnPod" })])
    expect(planned(h, new Map([["ns/p", livePod("ns/p", [], { phase: "Pending" })]])).decision).toBe("kept")
    expect(planned(h, new Map([["ns/p", { ...livePod("ns/p", []), networkStatus: "[{not json" }]])).decision).toBe("kept")
  })

  it("a reservation the listing found without a pod, whose pod exists now, stays (re-created since)", () => {
    const h = holding("ns/p", "Orphan", [], [reservation("10.0.0.9", { orphan: "PodGone" })])
    expect(planned(h, new Map([["ns/p", livePod("ns/p", ["10.0.0.1"])]]))).toMatchObject({ decision: "kept", kept: ["reservation 10.0.0.9: the pod was re-created (uid new) since the listing"] })
  })

  it("a reservation stays with its entry: an entry kept because its interface is not up yet keeps its reservation too", () => {
    const h = holding("ns/p", "Orphan", [entry("p", "7", "10.0.0.7", "ns/p", "net2")], [reservation("10.0.0.7", { orphan: "IPNotOnPod" })])
    // The status lists net1 only: net2 may still be coming up, so the entry is not proven free...
    const live = new Map([["ns/p", livePod("ns/p", ["10.0.0.1"])]])
    expect(podHoldsIP(live.get("ns/p")!, ip("10.0.0.7"), "net2")).toBe("unknown")
    // ...while the reservation alone (no interface) would be: it must stay with the entry.
    expect(podHoldsIP(live.get("ns/p")!, ip("10.0.0.7"), undefined)).toBe("not-held")
    expect(planned(h, live)).toMatchObject({ decision: "kept", reservations: [], kept: ["p 10.0.0.7: the live pod (uid new) may hold it", "reservation 10.0.0.7: its address stays allocated"] })
  })

  it("the Event is on the live pod's uid when the re-check found one, else on an empty uid", () => {
    const h = holding("ns/p", "Orphan", [entry("p", "4", "10.0.0.4", "ns/p")], [], { pod: { namespace: "ns", name: "p", uid: "" } })
    const [gone] = planRelease([h], { live: new Map() }).owners
    expect(gone!.entries[0]!.event?.regarding.uid).toBe("")
    const [live] = planRelease([h], { live: new Map([["ns/p", livePod("ns/p", ["10.0.0.9"])]]) }).owners
    expect(live!.entries[0]!.event?.regarding.uid).toBe("new")
  })

  it("a podref that is not namespace/name gets its entries freed, with no Event to write", () => {
    const h = holding("junk", "Orphan", [entry("p", "4", "10.0.0.4", "junk")], [], { pod: undefined })
    const [o] = planRelease([h], { live: new Map() }).owners
    expect(o!.entries.map((p) => p.event)).toEqual([undefined])
  })
})

describe("planRelease: a pod that will never run again", () => {
  const ended = holding("ns/job", "NeverRunsAgain", [entry("p", "1", "10.0.0.1", "ns/job")], [reservation("10.0.0.1")], { trigger: "terminal" })
  const finished = livePod("ns/job", ["10.0.0.1"], { uid: "old", phase: "Succeeded" })
  const judge = (pod: PodProjection) => (pod.phase === "Succeeded" ? ({ reason: "terminal", detail: "pod Succeeded" } as const) : undefined)

  it("the same incarnation, still finished: everything, counted under its reason, the Event saying why", () => {
    const [o] = planRelease([ended], { live: new Map([["ns/job", finished]]), neverRunsAgain: judge }).owners
    expect(o).toMatchObject({ decision: "release", trigger: "terminal", reservations: [{ name: "10.0.0.1" }] })
    expect(o!.entries.map((e) => e.event?.message)).toEqual(["successful cleanup of IP address [10.0.0.1] from network net1 (pod Succeeded)"])
  })

  it("running again at the re-check: kept", () => {
    expect(planned(ended, new Map([["ns/job", { ...finished, phase: "Running" }]])).decision).toBe("kept")
    const [o] = planRelease([ended], { live: new Map([["ns/job", { ...finished, phase: "Running" }]]), neverRunsAgain: judge }).owners
    expect(o!.kept.map((k) => k.why)).toEqual(["pod ns/job may run again", "pod ns/job may run again"])
  })

  it("another incarnation under the name: kept", () => {
    const [o] = planRelease([ended], { live: new Map([["ns/job", { ...finished, uid: "new" }]]), neverRunsAgain: judge }).owners
    expect(o!.decision).toBe("kept")
    expect(o!.kept[0]!.why).toContain("exists again (uid new)")
  })

  it("gone at the re-check: freed as a deletion would be", () => {
    const [o] = planRelease([ended], { live: new Map(), neverRunsAgain: judge }).owners
    expect(o).toMatchObject({ decision: "release", trigger: "terminal" })
    expect(o!.entries[0]!.event?.message).toBe("successful cleanup of IP address [10.0.0.1] from network net1")
  })
})

describe("planRelease: an operator's release (release --pod/--ip, release --from-report)", () => {
  const named = (extra: Partial<Holding> = {}) =>
    holding("ns/web-0", "Operator", [entry("p", "1", "10.0.0.1", "ns/web-0")], [reservation("10.0.0.1")], { pod: { namespace: "ns", name: "web-0", uid: "" }, trigger: "operator", operator: { force: false }, ...extra })
  const judge = (pod: PodProjection) => (pod.phase === "Succeeded" ? ({ reason: "terminal", detail: "pod Succeeded" } as const) : undefined)

  it("no pod of that name: everything, counted under trigger operator, the Event saying it was an operator's release", () => {
    const [o] = planRelease([named()], { live: new Map(), neverRunsAgain: judge }).owners
    expect(o).toMatchObject({ decision: "release", trigger: "operator", reservations: [{ name: "10.0.0.1" }] })
    expect(o!.entries.map((e) => e.event)).toEqual([
      {
        regarding: { kind: "Pod", namespace: "ns", name: "web-0", uid: "" },
        type: "Normal",
        reason: "IPAddressGarbageCollected",
        message: "successful cleanup of IP address [10.0.0.1] from network net1 (released by an operator)"
      }
    ])
  })

  it("a pod of that name that may run: refused, everything kept, and why (even one whose status does not list the address)", () => {
    const [o] = planRelease([named()], { live: new Map([["ns/web-0", livePod("ns/web-0", ["10.0.0.9"])]]), neverRunsAgain: judge }).owners
    expect(o!.decision).toBe("kept")
    expect(o!.kept.map((k) => `${k.what}: ${k.why}`)).toEqual([
      "p 10.0.0.1: pod ns/web-0 exists (uid new) and may run: refused (--force frees it anyway)",
      "reservation 10.0.0.1: pod ns/web-0 exists (uid new) and may run: refused (--force frees it anyway)"
    ])
    expect(o!.kept.map((k) => k.entry?.entry.key ?? k.reservation?.name)).toEqual(["1", "10.0.0.1"])
  })

  it("a pod of that name that will never run again: freed without --force, on that pod's uid, the Event saying why and by whom", () => {
    const [o] = planRelease([named()], { live: new Map([["ns/web-0", livePod("ns/web-0", ["10.0.0.1"], { phase: "Succeeded" })]]), neverRunsAgain: judge }).owners
    expect(o).toMatchObject({ decision: "release", trigger: "operator" })
    expect(o!.entries[0]!.event).toMatchObject({
      regarding: { uid: "new" },
      message: "successful cleanup of IP address [10.0.0.1] from network net1 (pod Succeeded; released by an operator)"
    })
  })

  it("--force: freed while a pod of that name may run, and the Event says --force did it", () => {
    const [o] = planRelease([named({ operator: { force: true } })], { live: new Map([["ns/web-0", livePod("ns/web-0", ["10.0.0.1"])]]), neverRunsAgain: judge }).owners
    expect(o).toMatchObject({ decision: "release", trigger: "operator", reservations: [{ name: "10.0.0.1" }] })
    expect(o!.entries[0]!.event?.message).toBe("successful cleanup of IP address [10.0.0.1] from network net1 (released by an operator with --force)")
    // Forced with no pod there, --force decided nothing: the Event does not claim it did.
    const [gone] = planRelease([named({ operator: { force: true } })], { live: new Map() }).owners
    expect(gone!.entries[0]!.event?.message).toBe("successful cleanup of IP address [10.0.0.1] from network net1 (released by an operator)")
  })

  it("a report's orphans follow the sweep's rule, counted as the operator's", () => {
    const orphan = holding("ns/p", "Orphan", [entry("p", "4", "10.0.0.4", "ns/p"), entry("p", "5", "10.0.0.5", "ns/p")], [], { operator: { force: false } })
    const [o] = planRelease([orphan], { live: new Map([["ns/p", livePod("ns/p", ["10.0.0.5"])]]) }).owners
    expect(o).toMatchObject({ decision: "release", trigger: "operator" })
    expect(o!.entries.map((e) => e.event?.message)).toEqual(["successful cleanup of IP address [10.0.0.4] from network net1 (released by an operator)"])
    expect(o!.kept.map((k) => k.why)).toEqual(["the live pod (uid new) may hold it"])
    const ended = holding("ns/job", "NeverRunsAgain", [entry("p", "1", "10.0.0.1", "ns/job")], [], { trigger: "terminal", operator: { force: false } })
    const [e] = planRelease([ended], { live: new Map([["ns/job", livePod("ns/job", ["10.0.0.1"], { uid: "old", phase: "Succeeded" })]]), neverRunsAgain: judge }).owners
    expect(e).toMatchObject({ decision: "release", trigger: "operator" })
    expect(e!.entries[0]!.event?.message).toBe("successful cleanup of IP address [10.0.0.1] from network net1 (pod Succeeded; released by an operator)")
  })
})

describe("entriesByPool", () => {
  it("one list per pool, in the order pools first appear", () => {
    const h = holding("ns/p", "Deleted", [entry("b", "1", "10.0.1.1", "ns/p"), entry("a", "1", "10.0.0.1", "ns/p"), entry("b", "2", "10.0.1.2", "ns/p")], [])
    const [o] = planRelease([h], { live: new Map() }).owners
    expect([...entriesByPool(o!.entries)].map(([pool, es]) => [pool, es.map((e) => e.held.entry.key)])).toEqual([
      ["b", ["1", "2"]],
      ["a", ["1"]]
    ])
  })
})

describe("nextStep", () => {
  const retryable = new ReleaseError({ reason: "ApiError", pod: "ns/p", retryable: true, detail: "503" })
  const permanent = new ReleaseError({ reason: "BadNadConfig", pod: "ns/p", retryable: false, detail: "bad json" })
  it.each([
    ["Freed", Outcome.Freed({ freed: [], reservations: 0 }), 1, "Forget"],
    ["Kept", Outcome.Kept({ why: "alive" }), 1, "Forget"],
    ["Failed, retryable, attempts left", Outcome.Failed({ error: retryable }), 1, "Requeue"],
    ["Failed, retryable, last attempt", Outcome.Failed({ error: retryable }), 5, "GiveUp"],
    ["PartlyFreed, retryable", Outcome.PartlyFreed({ freed: [], reservations: 1, error: retryable }), 2, "Requeue"],
    ["Failed, bad input", Outcome.Failed({ error: permanent }), 1, "Drop"]
  ] as const)("%s → %s", (_, outcome, attempt, step) => {
    expect(nextStep(outcome, attempt, 5)._tag).toBe(step)
  })
  it.each([
    ["Freed with unseen networks", Outcome.Freed({ freed: [], reservations: 0 }), "LookAgain"],
    ["Kept with unseen networks (a live pod holds them)", Outcome.Kept({ why: "alive" }), "Forget"],
    ["Failed with unseen networks (the retry looks again anyway)", Outcome.Failed({ error: retryable }), "Requeue"]
  ] as const)("%s → %s", (_, outcome, step) => {
    expect(nextStep(outcome, 1, 5, true)._tag).toBe(step)
  })
})

describe("planRelease: rule 0, an address another live pod lists", () => {
  const claimed = (claim: Claim, extra: Partial<Holding> = {}) =>
    holding(
      "ns/someone-else",
      claim,
      [{ ...entry("p", "1", "10.0.0.1", "ns/someone-else"), claimants: ["ns/mon-a"] }, entry("p", "2", "10.0.0.2", "ns/someone-else")],
      [reservation("10.0.0.1"), reservation("10.0.0.2")],
      extra
    )
  const judge = (pod: PodProjection) => (pod.phase === "Succeeded" ? ({ reason: "terminal", detail: "pod Succeeded" } as const) : undefined)

  it.each(["Deleted", "Orphan", "NeverRunsAgain"] as const)("%s: the claimed entry and its reservation stay, held for the pod that lists it; the rest goes", (claim) => {
    const live = new Map([["ns/mon-a", livePod("ns/mon-a", ["10.0.0.1"])]])
    const [o] = planRelease([claimed(claim, { pod: { namespace: "ns", name: "someone-else", uid: "old" } })], { live, neverRunsAgain: judge }).owners
    expect(o!.entries.map((p) => formatIP(p.held.entry.ip))).toEqual(["10.0.0.2"])
    expect(o!.reservations.map((r) => r.name)).toEqual(["10.0.0.2"])
    expect(o!.kept.map((k) => `${k.what}: ${k.why} [${k.heldFor ?? ""}]`)).toEqual([
      "p 10.0.0.1: held for another: pod ns/mon-a (uid new) lists 10.0.0.1 in the same network [ns/mon-a]",
      "reservation 10.0.0.1: its address stays allocated []"
    ])
  })

  it("the claimant gone, finished, or no longer listing the address at the re-check: freed", () => {
    for (const live of [
      new Map<string, PodProjection>(),
      new Map([["ns/mon-a", livePod("ns/mon-a", ["10.0.0.1"], { phase: "Succeeded" })]]),
      new Map([["ns/mon-a", livePod("ns/mon-a", ["10.0.0.7"])]])
    ]) {
      const [o] = planRelease([claimed("Orphan")], { live }).owners
      expect(o!.entries.map((p) => formatIP(p.held.entry.ip))).toEqual(["10.0.0.1", "10.0.0.2"])
      expect(o!.kept).toEqual([])
    }
  })

  it("a claimant whose status cannot prove anything (Pending) keeps it", () => {
    const [o] = planRelease([claimed("Orphan")], { live: new Map([["ns/mon-a", livePod("ns/mon-a", ["10.0.0.1"], { phase: "Pending" })]]) }).owners
    expect(o!.kept.map((k) => k.heldFor)).toEqual(["ns/mon-a", undefined])
  })

  it("a reservation claimed on its own (its entry named for a pod that is gone) stays", () => {
    const h = holding("ns/someone-else", "Orphan", [], [{ ...reservation("10.0.0.1"), claimants: ["ns/mon-a"] }])
    const [o] = planRelease([h], { live: new Map([["ns/mon-a", livePod("ns/mon-a", ["10.0.0.1"])]]) }).owners
    expect(o).toMatchObject({ decision: "kept", reservations: [], kept: [{ what: "reservation 10.0.0.1", heldFor: "ns/mon-a" }] })
  })

  it("an operator's release keeps it; --force frees it", () => {
    const live = new Map([["ns/mon-a", livePod("ns/mon-a", ["10.0.0.1"])]])
    const asked = (force: boolean) => claimed("Operator", { trigger: "operator", operator: { force } })
    expect(planRelease([asked(false)], { live, neverRunsAgain: judge }).owners[0]!.kept.map((k) => k.heldFor)).toEqual(["ns/mon-a", undefined])
    expect(planRelease([asked(true)], { live, neverRunsAgain: judge }).owners[0]!.entries).toHaveLength(2)
  })
})

describe("planRelease: properties", () => {
  const octet = fc.integer({ min: 1, max: 12 })
  const holdingArb = fc.record({
    name: fc.constantFrom("a", "b", "c"),
    claim: fc.constantFrom<Claim>("Deleted", "Orphan", "Operator"),
    lasts: fc.uniqueArray(octet, { maxLength: 4 }),
    ifnames: fc.array(fc.constantFrom("net1", "net2", undefined), { minLength: 4, maxLength: 4 }),
    extraReservations: fc.uniqueArray(octet, { maxLength: 3 }),
    orphan: fc.constantFrom<ReservationOrphanReason | undefined>("PodGone", "IPNotOnPod", "NoAllocation", undefined)
  }).map(({ name, claim, lasts, ifnames, extraReservations, orphan }) => {
    const podref = `ns/${name}`
    const entries = lasts.map((last, i) => entry("p", String(last), `10.0.0.${last}`, podref, ifnames[i]))
    const names = [...new Set([...lasts, ...extraReservations])].map((last) => `10.0.0.${last}`)
    const operator = claim === "Operator" ? { operator: { force: false } } : {}
    return holding(podref, claim, entries, names.map((n) => reservation(n, { orphan: claim === "Orphan" ? (orphan ?? "NoAllocation") : undefined })), operator)
  })
  const liveArb = fc.option(
    fc.record({
      ips: fc.uniqueArray(octet, { maxLength: 4 }),
      phase: fc.constantFrom("Running", "Pending", "Succeeded"),
      garbled: fc.boolean()
    }),
    { nil: undefined }
  )
  const worldArb = fc.record({ holdings: fc.uniqueArray(holdingArb, { selector: (h) => h.podref, maxLength: 3 }), live: fc.array(liveArb, { minLength: 3, maxLength: 3 }) }).map(({ holdings, live }) => {
    const pods = new Map<string, PodProjection>()
    holdings.forEach((h, i) => {
      const l = live[i]
      if (l === undefined) return
      const pod = livePod(h.podref, l.ips.map((n) => `10.0.0.${n}`), { phase: l.phase })
      pods.set(h.podref, l.garbled ? { ...pod, networkStatus: "{" } : pod)
    })
    return { holdings, pods }
  })

  it.prop("never plans an entry a live pod may hold, nor anything of a deleted pod whose namesake lives or of a pod an operator named that may run", [worldArb], ([{ holdings, pods }]) => {
    for (const o of planRelease(holdings, { live: pods }).owners) {
      const live = pods.get(o.holding.podref)
      if (live === undefined) continue
      if (o.holding.claim === "Deleted" || o.holding.claim === "Operator") expect(o.entries.length + o.reservations.length).toBe(0)
      for (const p of o.entries) expect(podHoldsIP(live, p.held.entry.ip, p.held.entry.ifname)).toBe("not-held")
    }
  })

  it.prop("never plans a reservation whose allocation stays", [worldArb], ([{ holdings, pods }]) => {
    for (const o of planRelease(holdings, { live: pods }).owners) {
      const freed = new Set(o.entries.map((p) => p.held))
      const staying = new Set(o.holding.entries.filter((h) => !freed.has(h)).flatMap((h) => h.reservation ?? []))
      for (const r of o.reservations) expect(staying.has(r.name)).toBe(false)
    }
  })

  it.prop("total: one plan per holding, and every held entry and reservation either planned or kept with a reason", [worldArb], ([{ holdings, pods }]) => {
    const plan = planRelease(holdings, { live: pods })
    expect(plan.owners.map((o) => o.holding)).toEqual(holdings)
    for (const o of plan.owners) {
      if (o.decision === "nothing" || o.decision === "failed") continue
      expect(o.entries.length + o.reservations.length + o.kept.length).toBe(o.holding.entries.length + o.holding.reservations.length)
      for (const k of o.kept) expect(k.why.length).toBeGreaterThan(0)
    }
  })
})
