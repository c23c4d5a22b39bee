import { describe, expect, it } from "@effect/vitest"
import { type NeverRunsAgainPolicy, type NodeFact, neverRunsAgain, neverRunsAgainAt, nodeFactOf } from "../../src/domain/never-runs-again.ts"
import type { PodProjection } from "../../src/domain/pod.ts"

const NOW = Date.parse("2026-12-01T12:00:00Z")
const ago = (seconds: number) => new Date(NOW - seconds * 1000).toISOString()
const POLICY: NeverRunsAgainPolicy = { freeTerminalPods: true, freeEvictedPods: true, freeOnOutOfService: true, terminatingGraceMs: 30_000, freeOnNotReadyAfterMs: undefined }

const pod = (extra: Partial<PodProjection> = {}): PodProjection => ({ namespace: "ns", name: "p", uid: "u", nodeName: "node-1", phase: "Running", ...extra })
const node = (extra: { ready?: string; readySince?: string; outOfService?: boolean } = {}): NodeFact => ({
  _tag: "Present",
  node: { name: "node-1", resourceVersion: "1", ready: extra.ready ?? "True", readySince: extra.readySince ?? ago(3600), outOfService: extra.outOfService ?? false }
})
const GONE: NodeFact = { _tag: "Gone" }
const UNKNOWN: NodeFact = { _tag: "Unknown" }

/** Terminating since `seconds` ago (deletionTimestamp = the end of its grace period). */
const terminating = (seconds: number, extra: Partial<PodProjection> = {}) => pod({ deletionTimestamp: ago(seconds), ...extra })

describe("neverRunsAgain: freed", () => {
  it.each([
    ["Succeeded", pod({ phase: "Succeeded" }), node(), "terminal", "pod Succeeded"],
    ["Failed", pod({ phase: "Failed" }), node(), "terminal", "pod Failed"],
    ["evicted by the kubelet (Failed, reason Evicted)", pod({ phase: "Failed", phaseReason: "Evicted" }), node(), "evicted", "pod evicted"],
    ["evicted by the taint manager, terminating", terminating(-100, { disruption: "DeletionByTaintManager" }), node({ ready: "Unknown" }), "evicted", "pod evicted by the taint manager"],
    ["terminating past its grace + ours, node gone", terminating(31), GONE, "node-gone", "node gone"],
    ["terminating past its grace + ours, node out of service", terminating(31), node({ outOfService: true }), "out-of-service", "node out of service"]
  ] as const)("%s → %s", (_, p, n, reason, detail) => {
    expect(neverRunsAgain(p, n, NOW, POLICY)).toEqual({ reason, detail })
  })

  it("NotReady for longer than --free-on-notready-after (opt-in), past the grace", () => {
    const policy = { ...POLICY, freeOnNotReadyAfterMs: 300_000 }
    expect(neverRunsAgain(terminating(60), node({ ready: "Unknown", readySince: ago(301) }), NOW, policy)).toEqual({ reason: "not-ready", detail: "node not ready" })
    expect(neverRunsAgain(terminating(60), node({ ready: "False", readySince: ago(400) }), NOW, policy)?.reason).toBe("not-ready")
  })
})

describe("neverRunsAgain: kept", () => {
  it.each([
    ["Running on a Ready node", pod(), node()],
    ["Pending", pod({ phase: "Pending" }), node()],
    ["phase Unknown", pod({ phase: "Unknown" }), GONE],
    ["Running on a node that is gone, not terminating (PodGC deletes it; then it is a deletion)", pod(), GONE],
    ["terminating within its grace period, node gone", terminating(-5), GONE],
    ["terminating past its grace but within ours, node gone", terminating(29), GONE],
    ["terminating past everything on a Ready node", terminating(600), node()],
    ["terminating on a NotReady node, without the opt-in", terminating(600), node({ ready: "Unknown", readySince: ago(3600) })],
    ["terminating, node state not known (node cache not synced)", terminating(600), UNKNOWN],
    ["a DisruptionTarget with another reason, terminating", terminating(600, { disruption: "PreemptionByScheduler" }), node()],
    ["the taint manager's mark without a deletionTimestamp", pod({ disruption: "DeletionByTaintManager" }), node()]
  ] as const)("%s", (_, p, n) => {
    expect(neverRunsAgain(p, n, NOW, POLICY)).toBeUndefined()
  })

  it("NotReady not yet long enough (opt-in on)", () => {
    expect(neverRunsAgain(terminating(600), node({ ready: "Unknown", readySince: ago(100) }), NOW, { ...POLICY, freeOnNotReadyAfterMs: 300_000 })).toBeUndefined()
  })

  it.each([
    ["--no-free-terminal-pods", { freeTerminalPods: false }, pod({ phase: "Succeeded" }), node()],
    ["--no-free-evicted-pods (kubelet)", { freeEvictedPods: false }, pod({ phase: "Failed", phaseReason: "Evicted" }), node()],
    ["--no-free-evicted-pods (taint manager)", { freeEvictedPods: false }, terminating(600, { disruption: "DeletionByTaintManager" }), node()],
    ["--no-free-on-out-of-service", { freeOnOutOfService: false }, terminating(600), node({ outOfService: true })]
  ] as const)("switched off: %s", (_, off, p, n) => {
    expect(neverRunsAgain(p, n, NOW, { ...POLICY, ...off })).toBeUndefined()
  })
})

describe("neverRunsAgainAt: when to look again", () => {
  it("a terminating pod on a gone node: when its grace and ours run out", () => {
    expect(neverRunsAgainAt(terminating(10), GONE, NOW, POLICY)).toBe(NOW + 20_000)
  })
  it("on a NotReady node (opt-in): the later of the grace and the NotReady time", () => {
    expect(neverRunsAgainAt(terminating(60), node({ ready: "Unknown", readySince: ago(100) }), NOW, { ...POLICY, freeOnNotReadyAfterMs: 300_000 })).toBe(NOW + 200_000)
  })
  it("nothing to wait for: the rule holds now, or never will on these facts", () => {
    expect(neverRunsAgainAt(terminating(60), GONE, NOW, POLICY)).toBeUndefined()
    expect(neverRunsAgainAt(terminating(10), node(), NOW, POLICY)).toBeUndefined()
    expect(neverRunsAgainAt(pod(), GONE, NOW, POLICY)).toBeUndefined()
  })
})

describe("nodeFactOf: a pod's node in a view of the nodes", () => {
  const present = node()
  const view = (name: string) => (name === "node-1" && present._tag === "Present" ? present.node : undefined)
  it("present where the view holds it; gone where the view covers the name yet lacks it; else unknown", () => {
    expect(nodeFactOf(pod(), view, () => false)).toEqual(present)
    expect(nodeFactOf(pod({ nodeName: "node-2" }), view, () => true)).toEqual(GONE)
    expect(nodeFactOf(pod({ nodeName: "node-2" }), view, (name) => name === "node-1")).toEqual(UNKNOWN)
  })
  it("unknown for a pod bound to no node, whatever the view covers", () => {
    expect(nodeFactOf(pod({ nodeName: undefined }), view, () => true)).toEqual(UNKNOWN)
  })
})
